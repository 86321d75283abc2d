package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cexec/cexec/pluginapi/codegen"
)

// tokenizeRequest tokenizes, with one detection, every text of a generate
// request that may carry tenant data or anything else a generator (a
// model) must not see raw: the workspace listing, the skills' descriptions
// and code, the tools' descriptions, stubs and schemas. The generator then
// writes tokens, which the execution restores in string literals.
//
// Left as they are: the task (tokenized once per task), the previous
// attempt (the generator's own code, and a traceback the model-facing
// execution tokenized already: tokenizing tokens again would hide them
// behind [LITERAL_N]), and identifiers the program must spell out in code,
// where tokens are not restored: tool ids, servers, names, modules,
// functions, and skill names (lowercase Python identifiers).
func (r *taskRun) tokenizeRequest(ctx context.Context, req codegen.GenerateRequest) (codegen.GenerateRequest, error) {
	req.WorkspaceListing = slices.Clone(req.WorkspaceListing)
	req.Skills = slices.Clone(req.Skills)
	req.Tools = slices.Clone(req.Tools)
	var b textBatch
	for i := range req.WorkspaceListing {
		b.add(&req.WorkspaceListing[i])
	}
	for i := range req.Skills {
		b.add(&req.Skills[i].Description, &req.Skills[i].Source)
	}
	schemas := make([]json.RawMessage, len(req.Tools))
	for i := range req.Tools {
		b.add(&req.Tools[i].Description, &req.Tools[i].StubSource)
		schemas[i] = req.Tools[i].InputSchema
		if len(schemas[i]) == 0 {
			schemas[i] = json.RawMessage("null")
		}
	}
	var raw json.RawMessage
	if len(schemas) > 0 {
		var err error
		if raw, err = json.Marshal(schemas); err != nil {
			return req, fmt.Errorf("the tools' input schemas: %w", err)
		}
	}
	toks, raw, err := r.gs.TokenizeTexts(ctx, b.texts, raw)
	if err != nil {
		return req, err
	}
	b.set(toks)
	if len(schemas) > 0 {
		if err := json.Unmarshal(raw, &schemas); err != nil || len(schemas) != len(req.Tools) {
			return req, fmt.Errorf("the tools' input schemas came back from tokenizing as %d values: %v", len(schemas), err)
		}
		for i := range req.Tools {
			if len(req.Tools[i].InputSchema) > 0 {
				req.Tools[i].InputSchema = schemas[i]
			}
		}
	}
	return req, nil
}
