package audit

import (
	"bufio"
	"context"
	"fmt"
	"os"
)

// Report is what Verify found in one log.
type Report struct {
	Tenant string
	// Files are the files verified, in chain order.
	Files []string
	// Lines counts the lines that verified.
	Lines int
	// FirstSeq and LastSeq bound the verified chain (0 when empty). A
	// FirstSeq above 1 means older files were rotated away.
	FirstSeq, LastSeq uint64
	// Broken is the first line that does not hold, or nil.
	Broken *Break
	// lastFileLines counts the verified lines of the last file read, so a
	// removed tail is named by its line in that file.
	lastFileLines int
}

// Break names a line that breaks the chain.
type Break struct {
	File string
	// Line is the line number within File, from 1.
	Line int
	// Reason says how it breaks: edited, removed or inserted lines.
	Reason string
}

func (b *Break) String() string { return fmt.Sprintf("%s line %d: %s", b.File, b.Line, b.Reason) }

// Verify checks tenant's log ("" the daemon's) end to end. Appends wait
// while it reads.
func (l *Log) Verify(ctx context.Context, tenant string) (Report, error) {
	rep := Report{Tenant: tenant}
	c := l.chainOf(tenant)
	c.mu.Lock()
	defer c.mu.Unlock()
	err := l.withDir(tenant, func(dir *os.Root) error {
		var err error
		rep, err = VerifyDir(ctx, dir)
		return err
	})
	rep.Tenant = tenant
	if err == nil && rep.Broken == nil && c.loaded && rep.LastSeq < c.seq {
		// The files end before the last line this daemon wrote.
		last := ""
		if n := len(rep.Files); n > 0 {
			last = rep.Files[n-1]
		}
		rep.Broken = &Break{File: last, Line: rep.lastFileLines + 1, Reason: fmt.Sprintf("the log ends at seq %d, but seq %d was written: its last lines were removed", rep.LastSeq, c.seq)}
	}
	return rep, err
}

// VerifyDir checks the log in dir.
func VerifyDir(ctx context.Context, dir *os.Root) (Report, error) {
	var rep Report
	files, err := chainFiles(dir)
	if err != nil {
		return rep, err
	}
	rep.Files = files
	var prevSeq uint64
	prevHash := ""
	for _, name := range files {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		b, err := verifyFile(dir, name, &rep, &prevSeq, &prevHash)
		if err != nil {
			return rep, err
		}
		if b != nil {
			rep.Broken = b
			return rep, nil
		}
	}
	return rep, nil
}

func verifyFile(dir *os.Root, name string, rep *Report, prevSeq *uint64, prevHash *string) (*Break, error) {
	f, err := dir.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep.lastFileLines = 0
	r := bufio.NewReaderSize(f, 64<<10)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			return nil, nil
		}
		if line[len(line)-1] != '\n' {
			return &Break{File: name, Line: n, Reason: "the last line is incomplete (a write was cut short, or the file was truncated)"}, nil
		}
		d, derr := decode(line[:len(line)-1])
		if derr != nil {
			return &Break{File: name, Line: n, Reason: derr.Error()}, nil
		}
		switch {
		case *prevHash == "" && d.seq == 1 && d.prev != zeroHash:
			return &Break{File: name, Line: n, Reason: "the first line of the chain does not start from zero"}, nil
		case *prevHash == "":
			// The oldest file kept: older ones may have been rotated away.
			rep.FirstSeq = d.seq
		case d.seq != *prevSeq+1:
			return &Break{File: name, Line: n, Reason: fmt.Sprintf("it is seq %d, after seq %d: lines before it were removed or inserted", d.seq, *prevSeq)}, nil
		case d.prev != *prevHash:
			return &Break{File: name, Line: n, Reason: fmt.Sprintf("it does not link to seq %d: that line was edited or replaced", *prevSeq)}, nil
		}
		*prevSeq, *prevHash = d.seq, d.hash
		rep.Lines++
		rep.lastFileLines++
		rep.LastSeq = d.seq
	}
}
