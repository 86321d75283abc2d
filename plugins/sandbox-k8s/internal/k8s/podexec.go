package k8s

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// stream runs command in container of pod over pods/exec until it
// exits or ctx ends, with stdin and stdout (and stderr, separately) as
// given. It speaks WebSocket (the API server's current exec protocol) and
// falls back to SPDY where an older server or a proxy refuses the upgrade,
// as kubectl does.
func (c *cluster) stream(ctx context.Context, ns, pod, container string, command []string, stdin io.Reader, stdout, stderr io.Writer) error {
	req := c.core.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   command,
			Stdin:     stdin != nil,
			Stdout:    stdout != nil,
			Stderr:    stderr != nil,
		}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(c.config, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("exec in pod %s: %w", pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.config, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("exec in pod %s: %w", pod, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("exec in pod %s: %w", pod, err)
	}
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr}); err != nil {
		return fmt.Errorf("exec in pod %s: %w", pod, err)
	}
	return nil
}

// run runs command to completion with input on its stdin and fails with
// what it wrote when it fails. Stdout and stderr get a buffer each: the
// client copies the two streams from goroutines of their own.
func (c *cluster) run(ctx context.Context, ns, pod, container string, command []string, input []byte) error {
	var stdout, stderr bytes.Buffer
	if err := c.stream(ctx, ns, pod, container, command, bytes.NewReader(input), &stdout, &stderr); err != nil {
		if msg := strings.TrimSpace(stderr.String() + "\n" + stdout.String()); msg != "" {
			return fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	return nil
}
