package ranker

// DefaultSynonyms is a small list of near-synonyms for what tools act on and
// how, where task requests and tool descriptions habitually use different
// words: generic actions, office file formats and their applications.
// Entries are kept general (no product or server names) so the list helps
// any catalogue, not one evaluation set.
func DefaultSynonyms() [][]string {
	return [][]string{
		{"save", "write", "store", "export"},
		{"find", "search", "lookup", "query"},
		{"fetch", "retrieve", "download"},
		{"show", "display", "view"},
		{"create", "make", "new"},
		{"delete", "remove", "erase"},
		{"edit", "modify", "update", "change"},
		{"run", "execute", "launch"},
		{"read", "open", "load"},
		{"picture", "image", "photo"},
		{"chart", "graph", "plot"},
		{"md", "markdown"},
		{"docx", "word"},
		{"xlsx", "excel", "spreadsheet"},
		{"pptx", "ppt", "powerpoint", "presentation", "slides"},
		{"trending", "popular", "hot"},
	}
}
