package sessions

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// jsonSuffix marks bytes fields that hold a JSON document (context_json,
// value_json).
const jsonSuffix = "_json"

// protoJSON renders a session message as the session commands print it:
// every field under its proto name, in field order (unset messages and
// empty JSON as null, as --json of other commands does), integers as JSON
// numbers, and bytes fields holding JSON as the values they hold, under
// their name without _json. Protobuf JSON would print those as
// base64 and 64-bit integers as strings, which a log meant for people and
// scripts should not.
func protoJSON(m protoreflect.Message) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := writeMessage(&b, m); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeMessage(b *bytes.Buffer, m protoreflect.Message) error {
	b.WriteByte('{')
	fields := m.Descriptor().Fields()
	first := true
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !first {
			b.WriteByte(',')
		}
		first = false
		name := string(fd.Name())
		if fd.Kind() == protoreflect.BytesKind && strings.HasSuffix(name, jsonSuffix) {
			name = strings.TrimSuffix(name, jsonSuffix)
		}
		b.Write(quote(name))
		b.WriteByte(':')
		v := m.Get(fd)
		if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !m.Has(fd) {
			b.WriteString("null")
			continue
		}
		if !fd.IsList() {
			if err := writeValue(b, fd, v); err != nil {
				return err
			}
			continue
		}
		b.WriteByte('[')
		l := v.List()
		for j := range l.Len() {
			if j > 0 {
				b.WriteByte(',')
			}
			if err := writeValue(b, fd, l.Get(j)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return nil
}

func writeValue(b *bytes.Buffer, fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		return writeMessage(b, v.Message())
	case protoreflect.BytesKind:
		if strings.HasSuffix(string(fd.Name()), jsonSuffix) {
			if len(v.Bytes()) == 0 {
				b.WriteString("null")
				return nil
			}
			if err := json.Compact(b, v.Bytes()); err != nil {
				return fmt.Errorf("%s: %w", fd.Name(), err)
			}
			return nil
		}
		b.Write(quote(base64.StdEncoding.EncodeToString(v.Bytes())))
	case protoreflect.StringKind:
		b.Write(quote(v.String()))
	case protoreflect.BoolKind:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case protoreflect.EnumKind:
		ev := fd.Enum().Values().ByNumber(v.Enum())
		if ev == nil {
			b.WriteString(strconv.Itoa(int(v.Enum())))
			return nil
		}
		b.Write(quote(string(ev.Name())))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		s, err := json.Marshal(v.Float())
		if err != nil {
			return fmt.Errorf("%s: %w", fd.Name(), err)
		}
		b.Write(s)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		b.WriteString(strconv.FormatUint(v.Uint(), 10))
	default: // the signed integers
		b.WriteString(strconv.FormatInt(v.Int(), 10))
	}
	return nil
}

// quote is s as a JSON string, leaving <, > and & as they are: logged code
// stays readable.
func quote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
