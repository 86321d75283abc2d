// Package k8s is the sandbox-k8s backend: every sandbox is a pod that the
// agent-sandbox controller (kubernetes-sigs/agent-sandbox) hands out from a
// warm pool. The plugin keeps a SandboxTemplate and a SandboxWarmPool per
// tenant and pod shape, claims a pod with a SandboxClaim per sandbox, copies
// the standard runtime into it and runs the runtime's zygote there over
// pods/exec, whose stdin and stdout carry the runtime's frames. Everything
// it makes carries the labels cexec.io/owner and app.kubernetes.io/managed-by,
// by which a restarted plugin finds and deletes what it left.
package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/cexec/cexec/internal/version"
	"github.com/cexec/cexec/pluginapi"
	"github.com/cexec/cexec/pluginapi/sandbox"
)

var apiVersions = []string{sandbox.APIVersion}

// Plugin implements sandbox.Sandbox on Kubernetes.
type Plugin struct {
	log hclog.Logger
	// rest overrides the credentials of the settings (tests).
	rest *rest.Config

	mu       sync.Mutex
	set      *settings
	setDiags pluginapi.Diagnostics
	cl       *cluster
	clErr    error
	swept    bool
	boxes    sandbox.Registry[*box]
}

var _ sandbox.Sandbox = (*Plugin)(nil)

// New returns the backend; it reaches no cluster before Configure.
func New(log hclog.Logger) *Plugin {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	routeClientLogs(log)
	return &Plugin{log: log}
}

// Info describes the plugin and its configuration schema.
func (p *Plugin) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{
		Name:         "k8s",
		Kind:         pluginapi.KindSandbox,
		Version:      version.Version,
		APIVersions:  apiVersions,
		ConfigSchema: configSchema,
	}, nil
}

// Configure applies the plugin's block of cexec.hcl.
func (p *Plugin) Configure(ctx context.Context, config json.RawMessage, apiVersion string) (pluginapi.Diagnostics, error) {
	if diags := pluginapi.CheckAPIVersion(pluginapi.KindSandbox, apiVersions, apiVersion); diags != nil {
		return diags, nil
	}
	s, diags := decodeConfig(config)
	if diags.HasErrors() {
		return diags, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.set, p.setDiags, p.cl, p.clErr, p.swept = s, diags, nil, nil, false
	return diags, nil
}

// connect returns the settings and the cluster client, connecting once per
// configuration. The first connection deletes what an earlier process of
// this owner left (sweep).
func (p *Plugin) connect(ctx context.Context) (*settings, *cluster, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.set == nil {
		return nil, nil, fmt.Errorf("%w: sandbox-k8s is not configured: its block in cexec.hcl needs at least image", pluginapi.ErrUnavailable)
	}
	s := p.set
	if p.cl == nil && p.clErr == nil {
		c := p.rest
		if c == nil {
			c, p.clErr = restConfig(s)
		}
		if p.clErr == nil {
			p.cl, p.clErr = newCluster(c)
		}
	}
	if p.clErr != nil {
		return nil, nil, fmt.Errorf("%w: %v", pluginapi.ErrUnavailable, p.clErr)
	}
	if !p.swept {
		if err := sweep(ctx, p.cl, s, p.log); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", pluginapi.ErrUnavailable, err)
		}
		p.swept = true
	}
	return s, p.cl, nil
}

// Capabilities reports whether the cluster is reachable and serves the
// agent-sandbox resources.
func (p *Plugin) Capabilities(ctx context.Context) (sandbox.Capabilities, error) {
	caps := sandbox.Capabilities{Isolation: "kubernetes", PersistentInterpreter: true, RunAs: true, SessionInterpreter: true}
	s, cl, err := p.connect(ctx)
	if err != nil {
		caps.UnavailableReason = err.Error()
		return caps, nil
	}
	caps.Network = s.allowNetwork
	if s.runtimeClass != "" {
		caps.Isolation = "kubernetes/" + s.runtimeClass
	}
	if _, err := cl.dynamic.Resource(claimGVR).Namespace(s.namespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		caps.UnavailableReason = "the cluster does not serve SandboxClaims (is agent-sandbox with its extensions installed?): " + err.Error()
		return caps, nil
	}
	caps.Available = true
	return caps, nil
}

// sweep deletes the claims, warm pools and templates of this owner: after a
// restart the plugin knows none of its sandboxes, so all of them are left
// over, and the pools keep pods that nothing will claim.
func sweep(ctx context.Context, cl *cluster, s *settings, log hclog.Logger) error {
	sel := ownerSelector(s.owner)
	for _, gvr := range []schema.GroupVersionResource{claimGVR, poolGVR, templateGVR} {
		res := cl.dynamic.Resource(gvr).Namespace(s.namespace)
		list, err := res.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return fmt.Errorf("list %s left by owner %s: %w", gvr.Resource, s.owner, err)
		}
		for _, o := range list.Items {
			if err := res.Delete(ctx, o.GetName(), background()); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete %s %s left by an earlier run: %w", gvr.Resource, o.GetName(), err)
			}
			log.Info("deleted an object left by an earlier run", "resource", gvr.Resource, "name", o.GetName(), "sandbox", o.GetAnnotations()[annoID])
		}
	}
	return nil
}

func background() metav1.DeleteOptions {
	p := metav1.DeletePropagationBackground
	return metav1.DeleteOptions{PropagationPolicy: &p}
}

// Create claims a pod for the sandbox and starts the runtime in it.
func (p *Plugin) Create(ctx context.Context, req sandbox.CreateRequest) (pluginapi.Diagnostics, error) {
	s, cl, err := p.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w", req.ID, err)
	}
	spec, uploads, err := s.checkRequest(req)
	if err != nil {
		return nil, fmt.Errorf("create sandbox %s: %w: %v", req.ID, pluginapi.ErrInvalidArgument, err)
	}
	if err := p.boxes.Reserve(req.ID); err != nil {
		return nil, err
	}
	b, err := p.start(ctx, s, cl, req, spec, uploads)
	if err != nil {
		p.boxes.Release(req.ID)
		return nil, fmt.Errorf("create sandbox %s: %w", req.ID, err)
	}
	if !p.boxes.Commit(req.ID, b) {
		_ = b.destroy(context.Background())
		p.boxes.Release(req.ID)
		return nil, fmt.Errorf("create sandbox %s: %w", req.ID, pluginapi.ErrPluginShutdown)
	}
	return nil, nil
}

// start makes the template, pool and claim, waits for the claimed pod and
// starts the zygote in it. On failure nothing of the sandbox is left.
func (p *Plugin) start(ctx context.Context, s *settings, cl *cluster, req sandbox.CreateRequest, spec *podSpec, uploads []upload) (*box, error) {
	name := spec.templateName(s.owner)
	if err := ensure(ctx, cl, s, templateGVR, s.template(name, spec)); err != nil {
		return nil, err
	}
	if err := ensure(ctx, cl, s, poolGVR, s.pool(name, spec)); err != nil {
		return nil, err
	}
	claim := s.claim(req.ID, req.Tenant, name)
	claims := cl.dynamic.Resource(claimGVR).Namespace(s.namespace)
	if _, err := claims.Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create SandboxClaim %s: %w", claim.GetName(), err)
	}
	b := &box{
		id: req.ID, tenant: req.Tenant, claim: claim.GetName(), created: time.Now(),
		limits: spec.limits, env: req.Env, cl: cl, ns: s.namespace, log: p.log.With("sandbox", req.ID),
	}
	wctx, cancel := context.WithTimeout(ctx, s.readyTimeout)
	defer cancel()
	pod, err := waitClaimed(wctx, cl, s.namespace, claim.GetName())
	if err == nil {
		b.pod = pod
		err = b.start(wctx, s, uploads)
	}
	if err != nil {
		_ = b.destroy(context.Background())
		if spec.linkDown && b.pod == "" {
			// The likeliest reason a link_down pod never comes: Pod
			// Security admission (baseline or restricted) refuses it.
			err = fmt.Errorf("%w (network_isolation %q gives the pod an init container with NET_ADMIN, which Pod Security admission below \"privileged\" refuses: check the namespace's pod-security.kubernetes.io/enforce label and the warm pool's events, or use network_isolation \"policy\" on a CNI that enforces NetworkPolicy)", err, isolationLinkDown)
		}
		return nil, err
	}
	return b, nil
}

// ensure creates o unless an object of its name exists: names are hashes
// of the content, so an existing one is the same.
func ensure(ctx context.Context, cl *cluster, s *settings, gvr schema.GroupVersionResource, o *unstructured.Unstructured) error {
	_, err := cl.dynamic.Resource(gvr).Namespace(s.namespace).Create(ctx, o, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

// waitClaimed waits until the claim is Ready and returns its pod's name.
func waitClaimed(ctx context.Context, cl *cluster, ns, claim string) (string, error) {
	claims := cl.dynamic.Resource(claimGVR).Namespace(ns)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	why := "it has no Ready condition yet: is the agent-sandbox controller (with its extensions) running?"
	var lastErr error
	for {
		o, err := claims.Get(ctx, claim, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "", fmt.Errorf("SandboxClaim %s was deleted while waiting for it", claim)
		case err != nil:
			// Other errors may pass (the server restarting); the
			// deadline decides.
			lastErr = err
		default:
			lastErr = nil
			ready, reason := readyCondition(o)
			sb, _, _ := unstructured.NestedString(o.Object, "status", "sandbox", "name")
			if ready && sb != "" {
				return podOf(ctx, cl, ns, sb)
			}
			if reason != "" {
				why = reason
			}
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				why += " (last error: " + lastErr.Error() + ")"
			}
			return "", fmt.Errorf("SandboxClaim %s not ready: %s: %w", claim, why, ctx.Err())
		case <-tick.C:
		}
	}
}

// readyCondition reads the Ready condition of an agent-sandbox object.
func readyCondition(o *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != "Ready" {
			continue
		}
		reason := strings.TrimSpace(fmt.Sprintf("%v: %v", m["reason"], m["message"]))
		return m["status"] == "True", reason
	}
	return false, ""
}

// podOf names the pod of a Sandbox: the one it adopted from the warm pool,
// or its own, named after it.
func podOf(ctx context.Context, cl *cluster, ns, name string) (string, error) {
	sb, err := cl.dynamic.Resource(sandboxGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get Sandbox %s: %w", name, err)
	}
	if pod := sb.GetAnnotations()[podNameAnnotation]; pod != "" {
		return pod, nil
	}
	return name, nil
}

// Exec runs a program in the sandbox's zygote.
func (p *Plugin) Exec(ctx context.Context, req sandbox.ExecRequest, host sandbox.Host) (sandbox.ExecResult, error) {
	b, err := p.boxes.Get(req.SandboxID)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	return b.exec(ctx, req, host)
}

// Destroy ends the zygote and deletes the claim, and with it the Sandbox
// and its pod.
func (p *Plugin) Destroy(ctx context.Context, id string) error {
	b, err := p.boxes.Remove(id)
	if err != nil {
		return err
	}
	return b.destroy(ctx)
}

// List describes the live sandboxes of this plugin process.
func (p *Plugin) List(context.Context) ([]sandbox.Status, error) {
	boxes := p.boxes.All()
	out := make([]sandbox.Status, 0, len(boxes))
	for _, e := range boxes {
		b := e.Box
		out = append(out, sandbox.Status{ID: b.id, Tenant: b.tenant, State: b.state(), Created: b.created, Executions: b.executions.Load()})
	}
	return out, nil
}

// Health pings the sandbox's zygote.
func (p *Plugin) Health(ctx context.Context, id string) error {
	b, err := p.boxes.Get(id)
	if err != nil {
		return err
	}
	if b.broken.Load() || b.runner == nil {
		return fmt.Errorf("sandbox %s must be recycled: an execution left it in an unknown state", id)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := b.runner.Ping(ctx); err != nil {
		return fmt.Errorf("sandbox %s: %v", id, err)
	}
	return nil
}

// Close destroys every sandbox and deletes the warm pools and templates.
func (p *Plugin) Close() error {
	var wg sync.WaitGroup
	for _, b := range p.boxes.Close() {
		wg.Go(func() { _ = b.destroy(context.Background()) })
	}
	wg.Wait()
	p.boxes.Wait()
	p.mu.Lock()
	s, cl := p.set, p.cl
	p.mu.Unlock()
	if cl == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sweep(ctx, cl, s, p.log); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
