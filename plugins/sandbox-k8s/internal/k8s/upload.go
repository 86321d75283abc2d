package k8s

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/cexec/cexec/pluginapi/sandbox/runtime"
)

// upload is a host file or tree copied to /<target> in a new pod, under
// /cexec or /src.
type upload struct {
	source string
	target string // relative to /
}

// uploadLimit bounds what is copied into one pod.
const uploadLimit = 64 << 20

// unpackSrc extracts a tar read from stdin into argv[1], with the standard
// library only, so any image with Python has it. In the loader argv[1] is
// loadDir, whose cexec and src are the volumes the sandbox container
// mounts read-only at /cexec and /src.
const unpackSrc = `import sys,tarfile
t=tarfile.open(fileobj=sys.stdin.buffer,mode='r|')
t.extractall(sys.argv[1],**({'filter':'data'} if hasattr(tarfile,'data_filter') else {}))
`

func unpackCommand(python string) []string {
	return []string{python, "-I", "-S", "-c", unpackSrc, loadDir}
}

// packUploads is a tar of the runtime (at cexec/lib/) and the uploads.
func packUploads(uploads []upload) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	total := 0
	add := func(name string, mode fs.FileMode, data []byte) error {
		total += len(data)
		if total > uploadLimit {
			return fmt.Errorf("copy into the pod: more than %d MiB", uploadLimit>>20)
		}
		hdr := &tar.Header{Name: name, Mode: int64(mode.Perm()), Size: int64(len(data)), Typeflag: tar.TypeReg}
		if mode.IsDir() {
			hdr.Typeflag, hdr.Size, hdr.Name = tar.TypeDir, 0, name+"/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := addTree(runtime.Files(), strings.TrimPrefix(cexecDir, "/")+"/lib", add); err != nil {
		return nil, fmt.Errorf("pack the runtime: %w", err)
	}
	for _, u := range uploads {
		info, err := os.Stat(u.source)
		if err != nil {
			return nil, fmt.Errorf("copy %s into the pod: %w", u.source, err)
		}
		if !info.IsDir() {
			data, err := os.ReadFile(u.source)
			if err == nil {
				err = add(u.target, 0o444, data)
			}
			if err != nil {
				return nil, fmt.Errorf("copy %s into the pod: %w", u.source, err)
			}
			continue
		}
		if err := addTree(os.DirFS(filepath.Clean(u.source)), u.target, add); err != nil {
			return nil, fmt.Errorf("copy %s into the pod: %w", u.source, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// addTree adds the directories and regular files of fsys below prefix,
// read-only, skipping __pycache__.
func addTree(fsys fs.FS, prefix string, add func(string, fs.FileMode, []byte) error) error {
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := path.Join(prefix, p)
		if d.IsDir() {
			if d.Name() == "__pycache__" {
				return fs.SkipDir
			}
			return add(name, fs.ModeDir|0o555, nil)
		}
		info, err := fs.Stat(fsys, p)
		if err != nil || !info.Mode().IsRegular() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return add(name, 0o444, data)
	})
}
