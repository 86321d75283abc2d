// Package piitest holds what tests of PII detection and tokenization share,
// in the guard-pii plugin and in cexecd's vault alike: realistic mixed text
// and a stand-in detector.
package piitest

// Mixed text is prose, service logs, JSON
// records, CSV rows and code, with the numbers that trip detectors up
// (dates, timestamps, versions, prices, UUIDs, hashes, order numbers) and
// PII at the density of a CRM export or an access log. Every PII value it
// writes is recorded, so the text doubles as a labelled corpus. The same
// size and seed always give the same text.

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

var words = strings.Fields(`the a of to and in for on with is was that this it as by from at be
are have has will can not we our you your their they data report customer order account
service request update project team meeting review results quarter revenue growth users
system issue support release deploy build test invoice payment shipping delivery product
inventory region sales marketing budget forecast analysis summary status pending approved
rejected scheduled completed total average median percent increase decrease notes next
week month year today tomorrow please check confirm send attached document file folder`)

var names = []string{"Alice Johnson", "Bob Smith", "Carla Diaz", "Deepak Rao", "Emma Müller",
	"Fatima Khan", "Gustavo Silva", "Hana Sato", "Ivan Petrov", "Julia Rossi", "Kwame Mensah",
	"Li Wei", "Maria Garcia", "Noah Brown", "Olivia Chen", "Pierre Dubois"}

var domains = []string{"example.com", "example.org", "mail.example.net", "corp.example.co.uk", "example.de"}

const hexDigits = "0123456789abcdef"
const b62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// Planted is a PII value written into the text: text[Start:End], of a
// detector type (EMAIL, PHONE, IP_ADDRESS, CREDIT_CARD, IBAN, US_SSN,
// SECRET, PERSON).
type Planted struct {
	Start, End int
	Type       string
}

type gen struct {
	r       *rand.Rand
	b       strings.Builder
	planted []Planted
}

// pii writes a PII value and records where it went.
func (g *gen) pii(typ, value string) {
	start := g.b.Len()
	g.b.WriteString(value)
	g.planted = append(g.planted, Planted{Start: start, End: g.b.Len(), Type: typ})
}

// Mixed returns about size bytes (never less) of mixed text generated from
// seed.
func Mixed(size int, seed uint64) string {
	text, _ := MixedLabelled(size, seed)
	return text
}

// MixedLabelled is Mixed with the PII values it planted, in text order.
// Everything else in the text is meant not to be PII.
func MixedLabelled(size int, seed uint64) (string, []Planted) {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	g.b.Grow(size + 1024)
	for g.b.Len() < size {
		switch n := g.r.IntN(100); {
		case n < 30:
			g.prose()
		case n < 55:
			g.logLine()
		case n < 70:
			g.jsonRecord()
		case n < 82:
			g.csvRow()
		case n < 95:
			g.code()
		default:
			g.rare()
		}
		g.b.WriteByte('\n')
	}
	return g.b.String(), g.planted
}

func (g *gen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

func (g *gen) hex(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = hexDigits[g.r.IntN(16)]
	}
	return string(b)
}

func (g *gen) uuid() string {
	h := g.hex(32)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:]
}

func (g *gen) ts() string {
	return fmt.Sprintf("2024-%02d-%02dT%02d:%02d:%02d.%03dZ", 1+g.r.IntN(12), 1+g.r.IntN(28), g.r.IntN(24), g.r.IntN(60), g.r.IntN(60), g.r.IntN(1000))
}

func (g *gen) email() string {
	n := strings.ToLower(strings.ReplaceAll(g.pick(names), " ", "."))
	n = strings.NewReplacer("ü", "u").Replace(n)
	return fmt.Sprintf("%s%d@%s", n, g.r.IntN(100), g.pick(domains))
}

func (g *gen) phone() string {
	area := []int{201, 212, 303, 312, 415, 503, 617, 646, 702, 808}[g.r.IntN(10)]
	ex, line := 200+g.r.IntN(700), g.r.IntN(10000)
	switch g.r.IntN(4) {
	case 0:
		return fmt.Sprintf("(%d) %d-%04d", area, ex, line)
	case 1:
		return fmt.Sprintf("+1 %d-%d-%04d", area, ex, line)
	case 2:
		return fmt.Sprintf("+44 20 7946 %04d", line)
	default:
		return fmt.Sprintf("%d.%d.%04d", area, ex, line)
	}
}

func (g *gen) ip() string {
	if g.r.IntN(10) == 0 {
		return fmt.Sprintf("2001:db8:%x::%x", g.r.IntN(65536), g.r.IntN(65536))
	}
	return fmt.Sprintf("%d.%d.%d.%d", 1+g.r.IntN(223), g.r.IntN(256), g.r.IntN(256), 1+g.r.IntN(254))
}

func (g *gen) prose() {
	for s := 0; s < 1+g.r.IntN(3); s++ {
		n := 8 + g.r.IntN(14)
		for i := 0; i < n; i++ {
			w := g.pick(words)
			if i == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			} else {
				g.b.WriteByte(' ')
			}
			g.b.WriteString(w)
			switch g.r.IntN(30) {
			case 0:
				fmt.Fprintf(&g.b, " %d", 1990+g.r.IntN(40))
			case 1:
				fmt.Fprintf(&g.b, " %d.%d%%", g.r.IntN(100), g.r.IntN(10))
			case 2:
				fmt.Fprintf(&g.b, " v%d.%d.%d", g.r.IntN(5), g.r.IntN(20), g.r.IntN(30))
			case 3:
				fmt.Fprintf(&g.b, " $%d,%03d.%02d", 1+g.r.IntN(999), g.r.IntN(1000), g.r.IntN(100))
			}
		}
		g.b.WriteString(". ")
	}
}

func (g *gen) logLine() {
	level := []string{"INFO", "INFO", "INFO", "WARN", "DEBUG", "ERROR"}[g.r.IntN(6)]
	fmt.Fprintf(&g.b, "%s %-5s svc=api req=%s method=GET path=/api/v2/orders/%d status=%d dur=%d.%dms client=",
		g.ts(), level, g.uuid(), 100000+g.r.IntN(900000), []int{200, 200, 201, 404, 500}[g.r.IntN(5)],
		g.r.IntN(900), g.r.IntN(10))
	g.pii("IP_ADDRESS", g.ip())
	if g.r.IntN(8) == 0 {
		g.b.WriteString(" user=")
		g.pii("EMAIL", g.email())
	}
}

func (g *gen) jsonRecord() {
	fmt.Fprintf(&g.b, `{"id": %d, "name": "`, g.r.IntN(10000000))
	g.pii("PERSON", g.pick(names))
	g.b.WriteString(`", "email": "`)
	g.pii("EMAIL", g.email())
	g.b.WriteString(`", "phone": "`)
	g.pii("PHONE", g.phone())
	fmt.Fprintf(&g.b, `", "created": "2024-%02d-%02d", "amount": %d.%02d, "sku": "SKU-%04d-%s", "etag": "%s"}`,
		1+g.r.IntN(12), 1+g.r.IntN(28), g.r.IntN(10000), g.r.IntN(100), g.r.IntN(10000), strings.ToUpper(g.hex(4)), g.hex(40))
}

func (g *gen) csvRow() {
	fmt.Fprintf(&g.b, "%d,2024-%02d-%02d,%d.%02d,%d,%05d,ORD-%09d,%s",
		g.r.IntN(1000000), 1+g.r.IntN(12), 1+g.r.IntN(28), g.r.IntN(5000), g.r.IntN(100),
		1+g.r.IntN(20), g.r.IntN(100000), g.r.IntN(1000000000), g.pick(words))
}

func (g *gen) code() {
	switch g.r.IntN(4) {
	case 0:
		fmt.Fprintf(&g.b, "def process_%s_batch(items, limit=%d):  # commit %s", g.pick(words), 10*g.r.IntN(100), g.hex(7))
	case 1:
		fmt.Fprintf(&g.b, "    result = client.fetchUserAccountById(%d, timeout=%d.%d)", g.r.IntN(100000), g.r.IntN(60), g.r.IntN(10))
	case 2:
		fmt.Fprintf(&g.b, "import numpy as np  # numpy==%d.%d.%d, python %d.%d", 1, g.r.IntN(27), g.r.IntN(5), 3, 8+g.r.IntN(6))
	default:
		fmt.Fprintf(&g.b, "    for i in range(%d): total += values[i] * %d.%d  # see /usr/lib/python3/%s.py", g.r.IntN(1000), g.r.IntN(10), g.r.IntN(100), g.pick(words))
	}
}

func (g *gen) rare() {
	switch g.r.IntN(4) {
	case 0:
		g.b.WriteString("Payment card ")
		g.pii("CREDIT_CARD", "4111 1111 1111 1111")
		fmt.Fprintf(&g.b, " charged for order %d.", g.r.IntN(1000000))
	case 1:
		g.b.WriteString("Wire to IBAN ")
		g.pii("IBAN", "DE89 3704 0044 0532 0130 00")
		fmt.Fprintf(&g.b, ", reference %d.", g.r.IntN(100000))
	case 2:
		g.b.WriteString("Employee SSN: ")
		g.pii("US_SSN", fmt.Sprintf("%03d-%02d-%04d", 100+g.r.IntN(500), 10+g.r.IntN(89), 1000+g.r.IntN(8999)))
		g.b.WriteString(" on file.")
	default:
		b := make([]byte, 40)
		for i := range b {
			b[i] = b62[g.r.IntN(len(b62))]
		}
		b[g.r.IntN(len(b))] = byte('0' + g.r.IntN(10)) // keys carry digits
		g.b.WriteString(`config: api_token = "`)
		g.pii("SECRET", "sk-"+string(b))
		g.b.WriteString(`"`)
	}
}
