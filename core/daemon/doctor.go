package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/doctor"
)

// ErrChecksFailed is returned by Doctor when a check failed.
var ErrChecksFailed = errors.New("some checks failed")

// DoctorReport is what `cexecd doctor --json` prints and the control API's
// Doctor returns.
type DoctorReport struct {
	Config string         `json:"config,omitempty"`
	Daemon bool           `json:"daemon"`
	Checks []doctor.Check `json:"checks"`
	OK     bool           `json:"ok"`
}

// Doctor is `cexecd doctor`: it loads the config (its diagnostics are the
// first check) and checks the machine against it without starting
// anything long-lived. It returns ErrChecksFailed when a check failed.
func Doctor(ctx context.Context, o Options, asJSON bool, stdout io.Writer) error {
	o.defaults()
	log := newLogger(&o, logLevel(o.Overrides.LogLevel, "error"))
	cfg, diags, err := loadConfig(&o, log)
	if err != nil {
		return err
	}
	rep := DoctorReport{}
	if cfg != nil {
		rep.Config = cfg.Path
	}
	rep.Checks = append(rep.Checks, configCheck(cfg, diags))
	if cfg != nil {
		rep.Checks = append(rep.Checks, doctor.Run(ctx, cfg, doctor.Options{})...)
	}
	rep.OK = !doctor.Failed(rep.Checks)
	if err := WriteDoctor(stdout, rep, asJSON); err != nil {
		return err
	}
	if !rep.OK {
		return ErrChecksFailed
	}
	return nil
}

// configCheck turns the config's diagnostics into a check.
func configCheck(cfg *config.Config, diags hcl.Diagnostics) doctor.Check {
	if len(diags) == 0 {
		return doctor.Check{Name: "config", Status: doctor.OK, Detail: "no problems"}
	}
	var files map[string]*hcl.File
	if cfg != nil {
		files = cfg.Files()
	}
	var b bytes.Buffer
	_ = config.FormatDiagnostics(&b, diags, files)
	c := doctor.Check{Name: "config", Status: doctor.Warn, Detail: strings.TrimSpace(b.String()), Fix: "fix the lines the diagnostics name (cexecd validate shows them too)"}
	if diags.HasErrors() {
		c.Status = doctor.Fail
	}
	return c
}

// WriteDoctor prints a report as JSON or as a table with each failed
// check's fix under it.
func WriteDoctor(w io.Writer, rep DoctorReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	var b bytes.Buffer
	for _, c := range rep.Checks {
		fmt.Fprintf(&b, "%-5s %-26s %s\n", strings.ToUpper(c.Status), c.Name, strings.ReplaceAll(c.Detail, "\n", "\n      "))
		if c.Fix != "" && c.Status != doctor.OK {
			fmt.Fprintf(&b, "      fix: %s\n", c.Fix)
		}
	}
	if rep.OK {
		b.WriteString("\nno check failed\n")
	} else {
		b.WriteString("\nsome checks failed: see fix: under each\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}
