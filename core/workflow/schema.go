package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cexec/cexec/core/workflow/dsl"
	"github.com/cexec/cexec/internal/schemamsg"
)

// schemas compiles a document's inline JSON Schemas once each.
type schemas struct {
	mu   sync.Mutex
	byID map[*dsl.Schema]*jsonschema.Schema
}

// check validates v against s (nil passes); what names the value in the
// error ("the workflow's input", "task x's output").
func (c *schemas) check(s *dsl.Schema, v any, what string) error {
	if s == nil || s.Document == nil {
		return nil
	}
	sch, err := c.compile(s)
	if err != nil {
		return &Error{Type: ErrConfiguration, Status: 400, Title: what + ": schema does not compile", Detail: err.Error()}
	}
	if err := sch.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return validationError(what, schemamsg.Describe(ve))
		}
		return validationError(what, err.Error())
	}
	return nil
}

func (c *schemas) compile(s *dsl.Schema) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sch, ok := c.byID[s]; ok {
		return sch, nil
	}
	raw, err := json.Marshal(s.Document)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	// Nothing loads: a document's schema must not make cexecd read files
	// or fetch URLs.
	comp.UseLoader(jsonschema.SchemeURLLoader{})
	url := fmt.Sprintf("https://workflows.cexec.invalid/%p.json", s)
	if err := comp.AddResource(url, doc); err != nil {
		return nil, err
	}
	sch, err := comp.Compile(url)
	if err != nil {
		return nil, err
	}
	if c.byID == nil {
		c.byID = map[*dsl.Schema]*jsonschema.Schema{}
	}
	c.byID[s] = sch
	return sch, nil
}
