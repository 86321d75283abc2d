package msb

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Programs the server backend runs in the guest with `python -I -S -c`.
// They use nothing but the standard library, so any image with Python has
// them.
const (
	// unpackSrc extracts a gzipped tar, base64 in the remaining arguments,
	// into the directory argv[1].
	unpackSrc = `import sys,os,io,base64,tarfile
d=sys.argv[1]
os.makedirs(d,exist_ok=True)
t=tarfile.open(fileobj=io.BytesIO(base64.b64decode(''.join(sys.argv[2:]))),mode='r:gz')
t.extractall(d,**({'filter':'data'} if hasattr(tarfile,'data_filter') else {}))
`
	// mkdirSrc creates the directories in argv[1:], where it can.
	mkdirSrc = `import sys,os
for d in sys.argv[1:]:
    try:
        os.makedirs(d,exist_ok=True)
    except OSError as e:
        print(e,file=sys.stderr)
`
)

// Limits of one sandbox.command.run: one argument may not exceed the
// kernel's MAX_ARG_STRLEN (128 KiB), all of them ARG_MAX (usually 2 MiB).
const (
	argChunk     = 96 << 10
	commandBytes = 1 << 20
	// copyLimit bounds what is copied into a guest per directory.
	copyLimit = 64 << 20
)

// chunks splits s into arguments of at most argChunk bytes.
func chunks(s string) []string {
	var out []string
	for len(s) > argChunk {
		out = append(out, s[:argChunk])
		s = s[argChunk:]
	}
	return append(out, s)
}

// tarBatches packs the regular files of fsys into gzipped tars whose
// base64 fits in one command each. __pycache__ directories are skipped.
func tarBatches(fsys fs.FS) ([]string, error) {
	var batches []string
	var buf bytes.Buffer
	var gz *gzip.Writer
	var tw *tar.Writer
	files, total := 0, 0
	flush := func() error {
		if tw == nil {
			return nil
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
		enc := base64.StdEncoding.EncodeToString(buf.Bytes())
		if len(enc) > commandBytes {
			return fmt.Errorf("%d bytes do not fit in one command", buf.Len())
		}
		batches = append(batches, enc)
		buf.Reset()
		tw, files = nil, 0
		return nil
	}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "__pycache__" {
				return fs.SkipDir
			}
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			// Sockets, dangling symlinks and the like are not sources.
			return nil
		}
		total += len(data)
		if total > copyLimit {
			return fmt.Errorf("more than %d MiB to copy", copyLimit>>20)
		}
		// Source text compresses at least threefold; a batch stays well
		// inside one command.
		if tw != nil && buf.Len()+len(data)/3 > commandBytes/2 {
			if err := flush(); err != nil {
				return err
			}
		}
		if tw == nil {
			gz, _ = gzip.NewWriterLevel(&buf, gzip.BestCompression)
			tw = tar.NewWriter(gz)
		}
		files++
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return batches, nil
}

// copyIn copies fsys into the guest directory dst with
// sandbox.command.run.
func (b *serverBackend) copyIn(ctx context.Context, name, dst string, fsys fs.FS) error {
	batches, err := tarBatches(fsys)
	if err != nil {
		return fmt.Errorf("copy into the guest's %s: %w", dst, err)
	}
	for _, enc := range batches {
		args := append([]string{"-I", "-S", "-c", unpackSrc, dst}, chunks(enc)...)
		if err := b.guestCommand(ctx, name, args); err != nil {
			return fmt.Errorf("copy into the guest's %s: %w", dst, err)
		}
	}
	return nil
}

// guestCommand runs the guest's Python with args and fails with its
// stderr when it exits non-zero.
func (b *serverBackend) guestCommand(ctx context.Context, name string, args []string) error {
	r, err := b.rpc.command(ctx, name, b.s.python, args, 120)
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		return &GuestExitError{ExitCode: r.ExitCode, Stderr: lastLines(r.stream("stderr"), 10)}
	}
	return nil
}

// lastLines returns the last n lines of s, trimmed.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// guestTarget maps a read-only mount target under /cexec to where the
// server backend copies it: the same place under guest_dir.
func guestTarget(guestDir, target string) (string, bool) {
	rel, ok := strings.CutPrefix(target, guestCexec+"/")
	if !ok {
		return "", false
	}
	return path.Join(guestDir, rel), true
}
