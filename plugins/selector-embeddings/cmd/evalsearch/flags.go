package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

type options struct {
	evalDir    string
	dataset    string
	configPath string
	asJSON     bool
	scale      bool
	sizes      []int
	searches   int
}

func parseFlags(args []string) (options, error) {
	var o options
	var sizes string
	fs := flag.NewFlagSet("evalsearch", flag.ContinueOnError)
	fs.StringVar(&o.evalDir, "eval-dir", "../shared/eval", "directory whose subdirectories are datasets (with -dataset and -scale: default the dataset's parent)")
	fs.StringVar(&o.dataset, "dataset", "", "evaluate this one dataset directory instead of -eval-dir")
	fs.StringVar(&o.configPath, "config", "", "JSON file with the selector's plugin configuration")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	fs.BoolVar(&o.scale, "scale", false, "run the scale benchmark: instead of the quality evaluation, or after it with -dataset")
	fs.StringVar(&sizes, "sizes", "1000,50000", "catalogue sizes for -scale")
	fs.IntVar(&o.searches, "searches", 2000, "searches per size for -scale")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	evalDirSet := false
	fs.Visit(func(f *flag.Flag) { evalDirSet = evalDirSet || f.Name == "eval-dir" })
	if o.dataset != "" && o.scale && !evalDirSet {
		o.evalDir = filepath.Dir(filepath.Clean(o.dataset))
	}
	if !o.scale {
		return o, nil
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return o, fmt.Errorf("bad -sizes entry %q", s)
		}
		o.sizes = append(o.sizes, n)
	}
	if o.searches <= 0 {
		return o, errors.New("-searches must be > 0")
	}
	return o, nil
}
