package tokenbench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// Scale sizes the tasks' data.
type Scale struct {
	// Notes is how many notes there are; Phrase is in NotesWithPhrase of them.
	Notes, NotesWithPhrase int
	// CSVRows is the CSV's size; exactly 5 rows match the filter.
	CSVRows int
	// DocParagraphs is the long document's length.
	DocParagraphs int
	// Entities is the size of the memory graph.
	Entities int
}

// FullScale is the task sizes; tests use a small one.
var FullScale = Scale{Notes: 200, NotesWithPhrase: 6, CSVRows: 10000, DocParagraphs: 400, Entities: 500}

// SmallScale is a tenth of it or so, for tests and quick checks.
var SmallScale = Scale{Notes: 20, NotesWithPhrase: 3, CSVRows: 500, DocParagraphs: 40, Entities: 50}

// Phrase is what the notes task looks for.
const Phrase = "quarterly budget"

var words = strings.Fields(`time year people way day man thing woman life child world school state family
student group country problem hand part place case week company system program question work government
number night point home water room mother area money story fact month lot right study book eye job word
business issue side kind head house service friend father power hour game line end member law car city
community name president team minute idea kid body information back parent face others level office door
health person art war history party result change morning reason research girl guy moment air teacher
force education review plan design report meeting client launch release schedule vendor contract draft
summary market product feature customer support ticket deadline estimate risk budget forecast hiring
travel training policy audit server network backup migration rollout survey partner invoice payment`)

var cities = []string{"Berlin", "Lisbon", "Osaka", "Denver", "Nairobi", "Quito", "Oslo", "Perth", "Tunis", "Hanoi"}

// data is what the tasks' servers hold, and the answers a task must find.
type data struct {
	dir string
	// notes are the paths of the notes that mention Phrase.
	notes []string
	// csvRows are the 5 matching rows, as written.
	csvRows []string
	docLen  int
	// falcon are the people on project Falcon.
	falcon []string
	// memory is the graph file server-memory starts from.
	memory []byte
}

func sentence(r *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = words[r.IntN(len(words))]
	}
	w[0] = strings.ToUpper(w[0][:1]) + w[0][1:]
	return strings.Join(w, " ") + "."
}

func paragraph(r *rand.Rand) string {
	s := make([]string, 3+r.IntN(4))
	for i := range s {
		s[i] = sentence(r, 6+r.IntN(10))
	}
	return strings.Join(s, " ")
}

// writeData writes the files under dir/files (the filesystem server's
// root) and prepares the memory graph. The same seed gives the same bytes.
func writeData(dir string, sc Scale) (*data, error) {
	r := rand.New(rand.NewPCG(18, 2026))
	d := &data{dir: filepath.Join(dir, "files")}
	notesDir := filepath.Join(d.dir, "notes")
	if err := os.MkdirAll(notesDir, 0o755); err != nil {
		return nil, err
	}
	step := max(1, sc.Notes/max(1, sc.NotesWithPhrase))
	for i := range sc.Notes {
		var b strings.Builder
		fmt.Fprintf(&b, "# Note %03d\n\n", i+1)
		for range 2 {
			b.WriteString(paragraph(r) + "\n\n")
		}
		if i%step == step/2 && len(d.notes) < sc.NotesWithPhrase {
			b.WriteString("Action: revisit the " + Phrase + " before Friday.\n")
			d.notes = append(d.notes, fmt.Sprintf("note-%03d.md", i+1))
		}
		if err := os.WriteFile(filepath.Join(notesDir, fmt.Sprintf("note-%03d.md", i+1)), []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
	}

	var csv strings.Builder
	csv.WriteString("id,date,region,product,units,unit_price,customer\n")
	regions := []string{"north", "south", "east", "west"}
	products := []string{"widget", "gadget", "gizmo", "doohickey", "sprocket"}
	match := map[int]bool{}
	for len(match) < 5 {
		match[r.IntN(sc.CSVRows)] = true
	}
	for i := range sc.CSVRows {
		product := products[r.IntN(len(products))]
		if match[i] {
			product = "flux-capacitor"
		}
		row := fmt.Sprintf("%d,2026-%02d-%02d,%s,%s,%d,%d.%02d,customer-%04d", i+1, 1+r.IntN(12), 1+r.IntN(28),
			regions[r.IntN(len(regions))], product, 1+r.IntN(50), 1+r.IntN(500), r.IntN(100), r.IntN(9000))
		if match[i] {
			d.csvRows = append(d.csvRows, row)
		}
		csv.WriteString(row + "\n")
	}
	if err := os.WriteFile(filepath.Join(d.dir, "sales.csv"), []byte(csv.String()), 0o644); err != nil {
		return nil, err
	}

	var doc strings.Builder
	doc.WriteString("# Design review\n\n")
	for i := range sc.DocParagraphs {
		if i%20 == 0 {
			fmt.Fprintf(&doc, "## Section %d\n\n", i/20+1)
		}
		doc.WriteString(paragraph(r) + "\n\n")
	}
	d.docLen = doc.Len()
	if err := os.WriteFile(filepath.Join(d.dir, "design-review.md"), []byte(doc.String()), 0o644); err != nil {
		return nil, err
	}

	tiny := "# service settings\nhost = 127.0.0.1\nport = 8443\nworkers = 4\n"
	if err := os.WriteFile(filepath.Join(d.dir, "settings.ini"), []byte(tiny), 0o644); err != nil {
		return nil, err
	}

	var mem strings.Builder
	enc := json.NewEncoder(&mem)
	everyFalcon := max(1, sc.Entities/5)
	for i := range sc.Entities {
		name := fmt.Sprintf("Member %03d", i+1)
		obs := []string{
			"lives in " + cities[r.IntN(len(cities))],
			"role: " + words[r.IntN(len(words))] + " lead",
			fmt.Sprintf("joined in %d", 2010+r.IntN(16)),
			sentence(r, 8),
		}
		if i%everyFalcon == everyFalcon/2 {
			obs = append(obs, "works on project Falcon")
			d.falcon = append(d.falcon, name)
		}
		if err := enc.Encode(map[string]any{"type": "entity", "name": name, "entityType": "person", "observations": obs}); err != nil {
			return nil, err
		}
	}
	for i := 1; i < sc.Entities; i++ {
		if err := enc.Encode(map[string]any{"type": "relation", "from": fmt.Sprintf("Member %03d", i+1),
			"to": fmt.Sprintf("Member %03d", i/10+1), "relationType": "reports_to"}); err != nil {
			return nil, err
		}
	}
	d.memory = []byte(mem.String())
	return d, nil
}

// memoryFile writes a fresh copy of the graph for one server-memory.
func (d *data) memoryFile(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, d.memory, 0o600)
}
