package config

import "github.com/hashicorp/hcl/v2"

// Defaults is the configuration of a cexecd started without a config file:
// built-in defaults, then CEXEC_* variables, then ov. Relative defaults
// (plugin_dir = ./bin) resolve against the working directory. Path is "".
func Defaults(ov Overrides) (*Config, hcl.Diagnostics) {
	cfg, diags := load(nil, "built-in defaults", ov)
	if cfg != nil {
		cfg.Path = ""
	}
	return cfg, diags
}
