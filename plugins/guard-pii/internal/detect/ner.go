package detect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cexec/cexec/pluginapi"
)

// NERClient finds person names through an external named-entity
// recognition service (a spaCy or Hugging Face model behind a small HTTP
// wrapper, or a hosted API).
//
// The contract: POST the endpoint with Content-Type application/json and
// body {"text": "..."}; a 200 answer is
//
//	{"entities": [{"start": 0, "end": 8, "type": "PERSON", "score": 0.98}]}
//
// where start and end (exclusive) count Unicode code points, as Python
// string indices do, and score is optional. Entities of type PERSON or PER
// become Person spans; other types are ignored.
type NERClient struct {
	url     string
	headers map[string]string
	client  *http.Client
}

// DefaultNERTimeout bounds one request to the NER endpoint.
const DefaultNERTimeout = 10 * time.Second

// maxNERResponse caps the answer read from the endpoint.
const maxNERResponse = 32 << 20

// NewNERClient returns a client for the endpoint at rawURL (http or https).
// headers are sent with every request (for example Authorization). A zero
// timeout means DefaultNERTimeout.
func NewNERClient(rawURL string, headers map[string]string, timeout time.Duration) (*NERClient, error) {
	if err := CheckNERURL(rawURL); err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = DefaultNERTimeout
	}
	return &NERClient{url: rawURL, headers: headers, client: &http.Client{Timeout: timeout}}, nil
}

// CheckNERURL validates an NER endpoint URL.
func CheckNERURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http or https URL", rawURL)
	}
	return nil
}

type nerRequest struct {
	Text string `json:"text"`
}

type nerEntity struct {
	Start int      `json:"start"`
	End   int      `json:"end"`
	Type  string   `json:"type"`
	Score *float64 `json:"score"`
}

type nerResponse struct {
	Entities []nerEntity `json:"entities"`
}

// Find returns the Person spans of text, with byte offsets. Failures wrap
// pluginapi.ErrUnavailable: the endpoint is down, answered an error, or
// broke the contract (an offset outside the text counts, since trusting it
// could leave a name in the clear).
func (c *NERClient) Find(ctx context.Context, text string) ([]Span, error) {
	body, err := json.Marshal(nerRequest{Text: text})
	if err != nil {
		return nil, fmt.Errorf("ner: encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("ner: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("ner: %w: %w", pluginapi.ErrUnavailable, redactURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxNERResponse))
	if err != nil {
		return nil, fmt.Errorf("ner: %w: read answer: %w", pluginapi.ErrUnavailable, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("ner: %w: endpoint answered %s", pluginapi.ErrUnavailable, resp.Status)
	}
	var out nerResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("ner: %w: answer is not the expected JSON: %w", pluginapi.ErrUnavailable, err)
	}
	return personSpans(text, out.Entities)
}

// redactURLError drops the URL from a transport error: it may carry a
// token in its query string.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// personSpans converts code-point offsets to byte offsets and keeps the
// person entities.
func personSpans(text string, ents []nerEntity) ([]Span, error) {
	runes := utf8.RuneCountInString(text)
	var offsets []int
	for i, e := range ents {
		if e.Start < 0 || e.End > runes || e.Start >= e.End {
			return nil, fmt.Errorf("ner: %w: entity %d has invalid offsets [%d, %d) for a text of %d characters", pluginapi.ErrUnavailable, i, e.Start, e.End, runes)
		}
		offsets = append(offsets, e.Start, e.End)
	}
	slices.Sort(offsets)
	offsets = slices.Compact(offsets)
	byteAt := make(map[int]int, len(offsets))
	k, r := 0, 0
	for b := range text {
		for k < len(offsets) && offsets[k] == r {
			byteAt[offsets[k]] = b
			k++
		}
		r++
	}
	for ; k < len(offsets); k++ {
		byteAt[offsets[k]] = len(text)
	}
	var spans []Span
	for _, e := range ents {
		switch strings.ToUpper(e.Type) {
		case "PERSON", "PER":
		default:
			continue
		}
		score := 0.85
		if e.Score != nil && *e.Score >= 0 && *e.Score <= 1 {
			score = *e.Score
		}
		spans = append(spans, Span{Start: byteAt[e.Start], End: byteAt[e.End], Type: Person, Score: score})
	}
	return spans, nil
}
