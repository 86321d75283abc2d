package daemon

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/api/endpoint"
	"github.com/cexec/cexec/core/audit"
	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/doctor"
	"github.com/cexec/cexec/core/pluginhost"
	"github.com/cexec/cexec/core/workspace"
)

// operations serves the control API's Operations service.
type operations struct {
	cexecv1.UnimplementedOperationsServer
	cfg func() *config.Config
	// load reads the config file as it is now, as a reload would.
	load  func() (*config.Config, hcl.Diagnostics, error)
	audit *audit.Log
	ws    *workspace.Manager
	cat   *catalog.Catalog
	host  *pluginhost.Host
}

func (s *operations) VerifyAudit(ctx context.Context, req *cexecv1.VerifyAuditRequest) (*cexecv1.VerifyAuditResponse, error) {
	var tenants []string
	switch {
	case req.All:
		infos, err := s.ws.Tenants(ctx)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "list tenants: %v", err)
		}
		tenants = append(tenants, "")
		for _, t := range infos {
			if t.Exists {
				tenants = append(tenants, t.ID)
			}
		}
	case req.Tenant == "":
		tenants = []string{endpoint.DefaultTenant}
	default:
		if err := config.ValidateTenantID(req.Tenant); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		tenants = []string{req.Tenant}
	}
	resp := &cexecv1.VerifyAuditResponse{}
	for _, t := range tenants {
		if t != "" && !s.ws.Exists(t) {
			// Never used: nothing to verify, and verifying must not create
			// the tenant. An id no config names is likely a typo.
			r := &cexecv1.AuditReport{Tenant: t}
			if t != endpoint.DefaultTenant && s.cfg().Tenant(t) == nil {
				r.Error = "no tenant " + t + " (not in cexec.hcl, never used)"
			}
			resp.Reports = append(resp.Reports, r)
			continue
		}
		rep, err := s.audit.Verify(ctx, t)
		r := &cexecv1.AuditReport{Tenant: t, Files: rep.Files, Lines: int64(rep.Lines), FirstSeq: rep.FirstSeq, LastSeq: rep.LastSeq}
		if err != nil {
			r.Error = err.Error()
		}
		if b := rep.Broken; b != nil {
			r.Broken = &cexecv1.AuditBreak{File: b.File, Line: int32(b.Line), Reason: b.Reason}
		}
		resp.Reports = append(resp.Reports, r)
	}
	return resp, nil
}

func (s *operations) Doctor(ctx context.Context, _ *cexecv1.DoctorRequest) (*cexecv1.DoctorResponse, error) {
	cfg := s.cfg()
	var checks []doctor.Check
	if s.load != nil {
		checks = append(checks, s.fileCheck())
	}
	checks = append(checks, doctor.Run(ctx, cfg, doctor.Options{})...)
	checks = append(checks, s.liveChecks()...)
	resp := &cexecv1.DoctorResponse{Config: cfg.Path}
	for _, c := range checks {
		resp.Checks = append(resp.Checks, &cexecv1.DoctorCheck{Name: c.Name, Status: c.Status, Detail: c.Detail, Fix: c.Fix})
	}
	return resp, nil
}

// fileCheck is the config file's own diagnostics as the file is now: the
// daemon runs on a config that loaded, but the file may have changed
// since, and a reload would refuse it.
func (s *operations) fileCheck() doctor.Check {
	next, diags, err := s.load()
	if err != nil {
		return doctor.Check{Name: "config", Status: doctor.Fail, Detail: err.Error(), Fix: "cexecd validate shows what is wrong with the file"}
	}
	c := configCheck(next, diags)
	if c.Status == doctor.Fail {
		c.Detail = "a reload would refuse the file as it is now:\n" + c.Detail
	}
	return c
}

// liveChecks are what only the running daemon knows: whether each
// upstream is connected and each plugin runs.
func (s *operations) liveChecks() []doctor.Check {
	var out []doctor.Check
	for _, u := range s.cat.Servers() {
		out = append(out, serverCheck(u))
	}
	for _, p := range s.host.Status() {
		c := doctor.Check{Name: "running plugin " + string(p.Kind) + "/" + p.Name, Status: doctor.OK, Detail: string(p.State)}
		if p.State != pluginhost.StateOK {
			c.Status, c.Detail = doctor.Warn, string(p.State)+": "+p.LastError
			c.Fix = "cexecctl plugins ls shows its error; cexecd's log has the plugin's own lines"
			if p.Required && p.State == pluginhost.StateFailed {
				c.Status = doctor.Fail
			}
		}
		out = append(out, c)
	}
	return out
}

// serverCheck is doctor's word on one upstream: a connection under way
// warns (calls wait for it), one that failed fails unless the server is
// optional.
func serverCheck(u catalog.ServerStatus) doctor.Check {
	c := doctor.Check{Name: "upstream " + u.Name, Status: doctor.OK, Detail: string(u.State)}
	if u.State == catalog.StateReady {
		if u.StrayLines > 0 {
			// The client skips such lines: an answer written that way is
			// lost and its call times out.
			c.Status = doctor.Warn
			c.Detail += "; " + strayDetail(u)
			c.Fix = strayFix
		}
		return c
	}
	c.Status = doctor.Warn
	if u.LastError != "" {
		c.Detail += ": " + u.LastError
	}
	switch {
	case u.State == catalog.StateConnecting || u.State == catalog.StateReconnecting:
		c.Fix = "calls wait while it connects; run doctor again in a moment, and if it does not connect check the command or url"
	case u.LastError != "":
		c.Fix = "check the command or url, and the server's own log lines in cexecd's log"
	default:
		c.Fix = "cexecctl servers ls shows its error; check the command or url, and the server's own log lines in cexecd's log"
	}
	if u.StrayLines > 0 {
		c.Detail += "; " + strayDetail(u)
		c.Fix += "; " + strayFix
	}
	if !u.Optional && u.State != catalog.StateConnecting && u.State != catalog.StateReconnecting {
		c.Status = doctor.Fail
	}
	return c
}

// strayDetail says that u wrote lines on stdout that are not JSON-RPC.
func strayDetail(u catalog.ServerStatus) string {
	if u.StrayLines == 1 {
		return "it wrote 1 line on stdout that is not JSON-RPC, which cexecd skips: " + u.LastStrayLine
	}
	return fmt.Sprintf("it wrote %d lines on stdout that are not JSON-RPC, which cexecd skips; the last: %s", u.StrayLines, u.LastStrayLine)
}

// strayFix is what to do about a server writing on stdout what is not JSON-RPC.
const strayFix = "a stdio server must write only JSON-RPC messages on stdout (an answer written otherwise is lost and its call times out): make it log to stderr (Python: print(..., file=sys.stderr); Node: console.error)"
