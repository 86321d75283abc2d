package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cexec/cexec/core/config"
	"github.com/cexec/cexec/core/workspace/diskimage"
	"github.com/cexec/cexec/internal/bytesize"
)

// How a tenant's disk quota holds (TenantInfo.DiskMode).
const (
	// DiskModeImage: the tenant's folder is a file system image of its
	// quota; writes past it fail with ENOSPC.
	DiskModeImage = "image"
	// DiskModeMeasured: the folder is measured after executions and the
	// next execution is refused when it is over.
	DiskModeMeasured = "measured"
)

// imagesDir holds the tenants' images, outside the tenant folders so that
// sandboxed code can never reach its own image.
const imagesDir = "images"

// migratePrefix names an image being filled from an older tenant folder.
const migratePrefix = ".migrate-"

// limits are the image limits of a quota: the quota for sandboxed code,
// and a reserve only cexecd (root) may use so that the session log line
// saying the quota is full, and the vault and state of that execution,
// still land.
func (q Quota) limits() diskimage.Limits {
	bytes, files := q.DiskBytes, q.MaxFiles
	if bytes <= 0 {
		bytes = config.DefaultDiskQuota
	}
	if files <= 0 {
		files = config.DefaultMaxFiles
	}
	return diskimage.Limits{Bytes: bytes, Files: files, Reserve: min(max(bytes/16, 4<<20), 64<<20)}
}

func (m *Manager) imagePath(id string) string {
	return filepath.Join(m.opts.DataDir, imagesDir, id+".img")
}

// attach makes dir, the tenant's folder, the mount of its image, creating
// the image on first use and moving an older plain folder's contents into
// it. It returns the mode the tenant ends up in: a folder that cannot move
// into an image (its contents do not fit) stays as it is, measured, with a
// warning, so that nothing is lost.
func (m *Manager) attach(ctx context.Context, id, dir string, q Quota) (string, error) {
	img, lim := m.imagePath(id), q.limits()
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	if ok, err := diskimage.Mounted(img, dir); err != nil {
		return "", err
	} else if ok {
		// A daemon that stopped without Close left it: keep it; a new
		// size applies at the next clean start.
		return DiskModeImage, nil
	}
	_, err := os.Stat(img)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if empty, err := emptyDir(dir); err != nil {
			return "", err
		} else if !empty {
			if err := m.migrate(ctx, id, dir, img, lim); err != nil {
				m.log.Warn("tenant folder stays on the plain file system: its disk quota is measured after executions, not enforced at write time",
					"tenant", id, "error", err)
				return DiskModeMeasured, nil
			}
		} else if err := diskimage.Create(ctx, img, lim); err != nil {
			return "", err
		}
	case err != nil:
		return "", err
	default:
		// An image exists: a folder with contents beside it is what a
		// migration that crashed after the copy left behind.
		if empty, err := emptyDir(dir); err != nil {
			return "", err
		} else if !empty {
			if err := m.discard(dir); err != nil {
				return "", err
			}
		}
	}
	if err := diskimage.Mount(ctx, img, dir); err != nil {
		return "", err
	}
	if err := m.fit(ctx, id, img, dir, lim); err != nil {
		_ = diskimage.Unmount(dir)
		return "", err
	}
	return DiskModeImage, nil
}

// fit resizes a mounted image whose size is not its quota's (the quota
// changed, or a migration made it larger): it unmounts, resizes and mounts
// again. An image holding more than its quota keeps its size until the
// tenant is under.
func (m *Manager) fit(ctx context.Context, id, img, dir string, lim diskimage.Limits) error {
	u, err := diskimage.UsageOf(dir)
	if err != nil || diskimage.Fits(u, lim) {
		return err
	}
	if u.Bytes > lim.Bytes {
		m.log.Warn("tenant stores more than its disk quota: its image keeps its size, and executions are refused until it is under",
			"tenant", id, "used", bytesize.Format(u.Bytes), "quota", bytesize.Format(lim.Bytes))
		return nil
	}
	if err := diskimage.Unmount(dir); err != nil {
		return err
	}
	ferr := diskimage.Fit(ctx, img, lim, u.Bytes)
	if ferr != nil {
		m.log.Warn("resize tenant image to its new disk quota; it keeps the old size", "tenant", id, "error", ferr)
	}
	return diskimage.Mount(ctx, img, dir)
}

// migrate copies an older tenant folder into a new image, sized to hold it
// even when it is over the quota (the tenant is then refused until it is
// under), and empties the folder. The image only takes its name once the
// copy is complete, so a crash leaves the folder as it was.
func (m *Manager) migrate(ctx context.Context, id, dir, img string, lim diskimage.Limits) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	held, err := walkUsage(root)
	root.Close()
	if err != nil {
		return err
	}
	lim.Bytes = max(lim.Bytes, held+held/8+(1<<20))
	tmpImg := filepath.Join(filepath.Dir(img), migratePrefix+filepath.Base(img))
	tmpDir := tmpImg + ".mnt"
	defer os.Remove(tmpImg)
	if err := diskimage.Create(ctx, tmpImg, lim); err != nil {
		return err
	}
	if err := os.Mkdir(tmpDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	defer os.Remove(tmpDir)
	if err := diskimage.Mount(ctx, tmpImg, tmpDir); err != nil {
		return err
	}
	// cp -a keeps owners, modes, times, links and holes.
	out, cerr := exec.CommandContext(ctx, "cp", "-a", "--", dir+"/.", tmpDir+"/").CombinedOutput()
	if err := diskimage.Unmount(tmpDir); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("copy into a new image: %w: %s", cerr, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmpImg, img); err != nil {
		return err
	}
	if held > 0 {
		// A new tenant's empty folder is no news.
		m.log.Info("moved tenant folder into its own file system image", "tenant", id, "bytes", held)
	}
	return m.discard(dir)
}

// discard empties a tenant folder whose contents live in its image now: it
// moves them to a GC folder first, so an interrupted removal is finished
// by the next New.
func (m *Manager) discard(dir string) error {
	trash := filepath.Join(m.dir, tempNameFor(gcPrefix, filepath.Base(dir)))
	if err := os.Rename(dir, trash); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	return os.RemoveAll(trash)
}

func emptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0, err
}
