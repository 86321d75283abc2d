package exec

import (
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strings"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

// jsonAttachment is an attachment in the --json output; inline data is
// base64, as encoding/json writes bytes.
type jsonAttachment struct {
	Kind     string `json:"kind"`
	MIMEType string `json:"mime_type"`
	Name     string `json:"name,omitempty"`
	URI      string `json:"uri,omitempty"`
	Size     int64  `json:"size"`
	Text     string `json:"text,omitempty"`
	Data     []byte `json:"data,omitempty"`
	// Path is a saved item's place in the workspace; SavedAs the file
	// --save-attachments wrote.
	Path    string `json:"path,omitempty"`
	SavedAs string `json:"saved_as,omitempty"`
}

// describe is an attachment's line after the program's output:
// "[image/png 95 bytes]", with the name, the workspace path of a saved one
// and the file --save-attachments wrote.
func describe(a *cexecv1.Attachment, savedAs string) string {
	var b strings.Builder
	b.WriteByte('[')
	if a.GetName() != "" {
		fmt.Fprintf(&b, "%s: ", a.GetName())
	}
	fmt.Fprintf(&b, "%s %d bytes", a.GetMimeType(), a.GetSize())
	if a.GetPath() != "" {
		fmt.Fprintf(&b, ", saved as /workspace/%s", a.GetPath())
	}
	if savedAs != "" {
		fmt.Fprintf(&b, ", written to %s", savedAs)
	}
	b.WriteByte(']')
	return b.String()
}

// saveAttachment writes an inline attachment into dir as <n>-<name> and
// returns the file's path; a saved one stays in the workspace ("").
func saveAttachment(dir string, n int, a *cexecv1.Attachment) (string, error) {
	if a.GetPath() != "" {
		return "", nil
	}
	name := filepath.Base(a.GetName())
	if name == "." || name == "/" || name == "" {
		name = a.GetKind()
		if exts, _ := mime.ExtensionsByType(a.GetMimeType()); len(exts) > 0 {
			name += exts[0]
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("%d-%s", n, name))
	data := a.GetData()
	if data == nil {
		data = []byte(a.GetText())
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("save attachment: %w", err)
	}
	return path, nil
}

// reportAttachments describes the attachments on w (stderr, after the
// program's output) and saves them into dir when it is set.
func reportAttachments(w io.Writer, dir string, atts []*cexecv1.Attachment, out *[]jsonAttachment) error {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("save attachments: %w", err)
		}
	}
	for i, a := range atts {
		savedAs := ""
		if dir != "" {
			var err error
			if savedAs, err = saveAttachment(dir, i+1, a); err != nil {
				return err
			}
		}
		if out != nil {
			*out = append(*out, jsonAttachment{Kind: a.GetKind(), MIMEType: a.GetMimeType(), Name: a.GetName(), URI: a.GetUri(),
				Size: a.GetSize(), Text: a.GetText(), Data: a.GetData(), Path: a.GetPath(), SavedAs: savedAs})
			continue
		}
		fmt.Fprintln(w, describe(a, savedAs))
	}
	return nil
}
