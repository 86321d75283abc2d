package forms

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/form"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
)

func init() {
	// pdfcpu otherwise creates and reads a config.yml under the daemon
	// user's config folder on first use.
	model.ConfigPath = "disable"
}

// Field types of pdf_fields.
const (
	TypeText     = "text"
	TypeDate     = "date"
	TypeCheckbox = "checkbox"
	TypeRadio    = "radio"
	TypeCombo    = "combobox"
	TypeList     = "listbox"
)

// Field is one AcroForm field as pdf_fields lists it. Value and Default are
// a string (text, date, radio, combobox), a boolean (checkbox) or a list of
// strings (listbox).
type Field struct {
	Name      string   `json:"name"`
	Type      string   `json:"type"`
	Label     string   `json:"label,omitempty"`
	Value     any      `json:"value"`
	Default   any      `json:"default,omitempty"`
	Options   []string `json:"options,omitempty"`
	Format    string   `json:"format,omitempty"`
	Multiline bool     `json:"multiline,omitempty"`
	Multi     bool     `json:"multi,omitempty"`
	Locked    bool     `json:"locked,omitempty"`
}

// exportForm reads the form of the PDF at rel with pdfcpu.
func exportForm(rel string, pdf []byte) (*form.FormGroup, error) {
	g, err := api.ExportForm(bytes.NewReader(pdf), "form", model.NewDefaultConfiguration())
	if errors.Is(err, pdfcpu.ErrWrongPassword) {
		// pdfcpu asks for "the correct password", which no tool takes.
		return nil, fmt.Errorf("%s is encrypted with a password, which the forms tools cannot open; give an unencrypted copy", rel)
	}
	switch {
	case err != nil && (errors.Is(err, pdfcpu.ErrCorruptHeader) || !bytes.Contains(pdf[:min(len(pdf), 1024)], []byte("%PDF-"))):
		return nil, fmt.Errorf("%s is not a PDF (a PDF starts with %%PDF-)", rel)
	// pdfcpu has no sentinel for a document without a form.
	case err != nil && strings.HasSuffix(err.Error(), "no form available"), err == nil && len(g.Forms) != 1:
		return nil, fmt.Errorf("%s has no form fields (the forms tools fill AcroForm fields)", rel)
	case err != nil:
		return nil, err
	}
	return g, nil
}

// fields lists the form's fields, sorted by name.
func fields(f *form.Form) []Field {
	var out []Field
	for _, x := range f.TextFields {
		out = append(out, Field{Name: x.Name, Type: TypeText, Label: x.AltName, Value: x.Value, Default: omitEmpty(x.Default), Multiline: x.Multiline, Locked: x.Locked})
	}
	for _, x := range f.DateFields {
		out = append(out, Field{Name: x.Name, Type: TypeDate, Label: x.AltName, Value: x.Value, Default: omitEmpty(x.Default), Format: x.Format, Locked: x.Locked})
	}
	for _, x := range f.CheckBoxes {
		out = append(out, Field{Name: x.Name, Type: TypeCheckbox, Label: x.AltName, Value: x.Value, Default: x.Default, Locked: x.Locked})
	}
	for _, x := range f.RadioButtonGroups {
		out = append(out, Field{Name: x.Name, Type: TypeRadio, Label: x.AltName, Value: x.Value, Default: omitEmpty(x.Default), Options: x.Options, Locked: x.Locked})
	}
	for _, x := range f.ComboBoxes {
		out = append(out, Field{Name: x.Name, Type: TypeCombo, Label: x.AltName, Value: x.Value, Default: omitEmpty(x.Default), Options: x.Options, Locked: x.Locked})
	}
	for _, x := range f.ListBoxes {
		var def any
		if len(x.Defaults) > 0 {
			def = x.Defaults
		}
		out = append(out, Field{Name: x.Name, Type: TypeList, Label: x.AltName, Value: nonNil(x.Values), Default: def, Options: x.Options, Multi: x.Multi, Locked: x.Locked})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func omitEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// values maps each field's name to its value.
func values(f *form.Form) map[string]any {
	out := map[string]any{}
	for _, x := range fields(f) {
		out[x.Name] = x.Value
	}
	return out
}

// setValues sets vals on the form's fields by name, checking each value
// against its field's type and options. It returns the names set, sorted.
func setValues(f *form.Form, vals map[string]json.RawMessage) ([]string, error) {
	byName := map[string]Field{}
	for _, x := range fields(f) {
		byName[x.Name] = x
	}
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fd, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("values.%s: the form has no field %q; its fields are %s", n, n, strings.Join(slices.Sorted(mapsKeys(byName)), ", "))
		}
		if fd.Locked {
			return nil, fmt.Errorf("values.%s: the field is locked", n)
		}
		if err := setOne(f, fd, vals[n]); err != nil {
			return nil, fmt.Errorf("values.%s: %w", n, err)
		}
	}
	return names, nil
}

func mapsKeys(m map[string]Field) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func setOne(f *form.Form, fd Field, raw json.RawMessage) error {
	switch fd.Type {
	case TypeCheckbox:
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			var s string
			if json.Unmarshal(raw, &s) != nil || (s != "true" && s != "false") {
				return fmt.Errorf("a checkbox takes true or false")
			}
			b = s == "true"
		}
		for _, x := range f.CheckBoxes {
			if x.Name == fd.Name {
				x.Value = b
			}
		}
		return nil
	case TypeList:
		var vs []string
		if err := json.Unmarshal(raw, &vs); err != nil {
			return fmt.Errorf("a list box takes a list of strings")
		}
		for _, v := range vs {
			if !slices.Contains(fd.Options, v) {
				return fmt.Errorf("%q is not one of the options %s", v, strings.Join(fd.Options, ", "))
			}
		}
		for _, x := range f.ListBoxes {
			if x.Name == fd.Name {
				x.Values = vs
			}
		}
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("a %s field takes a string", fd.Type)
	}
	switch fd.Type {
	case TypeText:
		for _, x := range f.TextFields {
			if x.Name == fd.Name {
				x.Value = s
			}
		}
	case TypeDate:
		for _, x := range f.DateFields {
			if x.Name == fd.Name {
				x.Value = s
			}
		}
	case TypeRadio, TypeCombo:
		if !slices.Contains(fd.Options, s) && !(fd.Type == TypeCombo && editable(f, fd.Name)) {
			return fmt.Errorf("%q is not one of the options %s", s, strings.Join(fd.Options, ", "))
		}
		for _, x := range f.RadioButtonGroups {
			if x.Name == fd.Name {
				x.Value = s
			}
		}
		for _, x := range f.ComboBoxes {
			if x.Name == fd.Name {
				x.Value = s
			}
		}
	}
	return nil
}

func editable(f *form.Form, name string) bool {
	for _, x := range f.ComboBoxes {
		if x.Name == name {
			return x.Editable
		}
	}
	return false
}

// fill returns pdf with vals set, and the names set.
func fill(rel string, pdf []byte, vals map[string]json.RawMessage) ([]byte, []string, error) {
	g, err := exportForm(rel, pdf)
	if err != nil {
		return nil, nil, fmt.Errorf("path: %w", err)
	}
	names, err := setValues(&g.Forms[0], vals)
	if err != nil {
		return nil, nil, err
	}
	data, err := json.Marshal(g)
	if err != nil {
		return nil, nil, err
	}
	var out bytes.Buffer
	err = api.FillForm(bytes.NewReader(pdf), bytes.NewReader(data), &out, model.NewDefaultConfiguration())
	switch {
	case errors.Is(err, api.ErrNoFormFieldsAffected):
		// Every field already holds its value: the copy is the original.
		return pdf, names, nil
	case err != nil:
		return nil, nil, err
	}
	return out.Bytes(), names, nil
}
