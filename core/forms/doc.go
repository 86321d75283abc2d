// Package forms is cexecd's built-in MCP server "forms": it reads and fills
// PDF AcroForms in the calling tenant's workspace with pdfcpu
// (github.com/pdfcpu/pdfcpu, v0.15.0), in the daemon rather than in a
// sandbox.
//
// Tools:
//
//	pdf_fields(path)              the form's fields: name, type, label, value, default, options
//	fill_pdf(path, values, out)   a copy of path with values set, written to out
//	read_pdf(path)                the fields' values, by name
//
// Paths are relative to the workspace, or absolute under /workspace (what
// sandboxed code sees). Every file access goes through an os.Root opened on
// the tenant's workspace for the call, so "..", absolute paths elsewhere and
// symlinks planted by sandboxed code cannot lead out of it; each tenant's
// server is built for that tenant alone (the catalog runs one instance per
// tenant), so no argument names another tenant's files.
//
// Because it is an MCP server on the catalog's path, its calls get what every
// tool call gets: allowed_servers, policies and guards, PII tokens restored in
// arguments (so a value reaches the PDF untokenized only in fill_pdf),
// validation against the input schemas below and the session log.
package forms
