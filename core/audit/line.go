package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// zeroHash is prev of the first line of a chain.
var zeroHash = strings.Repeat("0", 64)

// record is a line's content before its hash.
type record struct {
	Seq    uint64 `json:"seq"`
	Prev   string `json:"prev"`
	Tenant string `json:"tenant,omitempty"`
	Event
}

const hashKey = `,"hash":"`

// hashSuffix is the length of `,"hash":"<64 hex>"}`.
const hashSuffix = len(hashKey) + 64 + 2

// encode returns the line (with its newline) and its hash.
func encode(r *record) ([]byte, string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	h := hex.EncodeToString(sum[:])
	line := make([]byte, 0, len(b)+hashSuffix+1)
	line = append(line, b[:len(b)-1]...)
	line = append(line, hashKey...)
	line = append(line, h...)
	line = append(line, "\"}\n"...)
	return line, h, nil
}

// decoded is what a stored line says about the chain.
type decoded struct {
	seq        uint64
	prev, hash string
}

var errBadHash = errors.New("its hash does not match its content: the line was edited")

// decode checks one line (without its newline) against its own hash.
func decode(line []byte) (decoded, error) {
	n := len(line)
	if n < hashSuffix+2 || !bytes.Equal(line[n-hashSuffix:n-hashSuffix+len(hashKey)], []byte(hashKey)) || !bytes.HasSuffix(line, []byte(`"}`)) {
		return decoded{}, errors.New("it does not end with its hash: the line was edited or is not an audit line")
	}
	h := string(line[n-hashSuffix+len(hashKey) : n-2])
	canon := make([]byte, 0, n-hashSuffix+1)
	canon = append(canon, line[:n-hashSuffix]...)
	canon = append(canon, '}')
	sum := sha256.Sum256(canon)
	if hex.EncodeToString(sum[:]) != h {
		return decoded{}, errBadHash
	}
	var r struct {
		Seq  uint64 `json:"seq"`
		Prev string `json:"prev"`
	}
	if err := json.Unmarshal(canon, &r); err != nil {
		return decoded{}, fmt.Errorf("it is not valid JSON: %w", err)
	}
	return decoded{seq: r.Seq, prev: r.Prev, hash: h}, nil
}
