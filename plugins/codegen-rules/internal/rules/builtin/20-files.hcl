# Files, through the filesystem reference server
# (@modelcontextprotocol/server-filesystem). Relative paths are taken relative
# to the first directory the server allows.

snippet "fs" {
  source = <<-PY
    import posixpath
    from servers.filesystem import list_allowed_directories

    def _text(result):
        if isinstance(result, dict) and isinstance(result.get("content"), str):
            return result["content"]
        return result if isinstance(result, str) else str(result)

    def _path(p):
        if p.startswith("/"):
            return p
        lines = _text(list_allowed_directories()).splitlines()
        roots = [l.strip() for l in lines if l.strip().startswith("/")]
        if not roots:
            raise RuntimeError("the filesystem server allows no directory")
        return posixpath.normpath(posixpath.join(roots[0], p))

    def _entries(listing):
        out = []
        for line in _text(listing).splitlines():
            kind, _, name = line.partition(" ")
            if kind in ("[FILE]", "[DIR]") and name:
                out.append((kind == "[DIR]", name))
        return out
  PY
}

rule "list_files" {
  description = "List the files and directories in a directory"
  pattern     = "(?i)^(?:list|show)(?: me)?(?: all)?(?: the)? files(?: in(?: the)?(?: folder| directory)? (?P<path>[^\\s?]+))?\\s*[?.!]?$"
  requires    = ["filesystem/list_directory"]
  defaults    = { path = "." }
  examples    = ["list files in notes", "list the files", "show all files in the folder reports"]
  template    = <<-PY
    {{ template "fs" . }}
    from servers.filesystem import list_directory

    for is_dir, name in _entries(list_directory(path=_path({{ .path }}))):
        print(name + ("/" if is_dir else ""))
  PY
}

rule "count_files" {
  description = "Count the files in a directory"
  pattern     = "(?i)^how many files (?:are )?(?:there )?in(?: the)?(?: folder| directory)? (?P<path>[^\\s?]+)\\s*\\??$"
  requires    = ["filesystem/list_directory"]
  examples    = ["how many files are in notes?", "how many files in reports"]
  template    = <<-PY
    {{ template "fs" . }}
    from servers.filesystem import list_directory

    print(sum(1 for is_dir, _ in _entries(list_directory(path=_path({{ .path }}))) if not is_dir))
  PY
}

rule "count_lines" {
  description = "Count the lines of a file"
  pattern     = "(?i)^(?:how many lines (?:are )?(?:there )?(?:in|does) (?P<path>[^\\s?]+)(?: have)?|count (?:the )?lines (?:in|of) (?P<path2>[^\\s?]+))\\s*\\??$"
  requires    = ["filesystem/read_text_file"]
  defaults    = { path = "", path2 = "" }
  examples    = ["how many lines are in notes/todo.txt?", "count the lines in notes/todo.txt"]
  template    = <<-PY
    {{ template "fs" . }}
    from servers.filesystem import read_text_file

    text = _text(read_text_file(path=_path({{ .path }} or {{ .path2 }})))
    print(len(text.splitlines()))
  PY
}

rule "read_file" {
  description = "Show the contents of a file"
  pattern     = "(?i)^(?:read|show|print|display|cat)(?: me)?(?: the)?(?: contents? of)?(?: the file)? (?P<path>[^\\s?]+\\.[A-Za-z0-9]+)\\s*[?.!]?$"
  requires    = ["filesystem/read_text_file"]
  examples    = ["read notes/todo.txt", "show the contents of the file reports/q3.md"]
  template    = <<-PY
    {{ template "fs" . }}
    from servers.filesystem import read_text_file

    print(_text(read_text_file(path=_path({{ .path }}))))
  PY
}

rule "search_files" {
  description = "Find files whose names match a glob pattern"
  pattern     = "(?i)^(?:find|search for|search) files (?:matching|named|called) (?P<pattern>\\S+?)(?: in(?: the)?(?: folder| directory)? (?P<path>[^\\s?]+))?\\s*[?.!]?$"
  requires    = ["filesystem/search_files"]
  defaults    = { path = "." }
  examples    = ["find files matching *.md", "search files named *.csv in data"]
  template    = <<-PY
    {{ template "fs" . }}
    from servers.filesystem import search_files

    root = _path({{ .path }})
    pattern = {{ .pattern }}
    if "/" not in pattern and not pattern.startswith("**"):
        pattern = "**/" + pattern
    found = [l for l in _text(search_files(path=root, pattern=pattern)).splitlines() if l.startswith("/")]
    for p in sorted(found):
        print(posixpath.relpath(p, root))
    if not found:
        print("no files match")
  PY
}

rule "files_containing" {
  description = "Which files in a directory contain a piece of text"
  pattern     = "(?i)^(?:which|what) files(?: in(?: the)?(?: folder| directory)? (?P<path>\\S+))? (?:contain|mention|include) (?P<text>.+?)\\s*\\??$"
  requires    = ["filesystem/list_directory", "filesystem/read_text_file"]
  defaults    = { path = "." }
  examples    = ["which files in notes mention budget?", "what files contain \"TODO\""]
  template    = <<-PY
    {{ template "fs" . }}
    from servers.filesystem import list_directory, read_text_file

    root = _path({{ .path }})
    needle = {{ .text }}.strip().strip("\"'").lower()
    hits = []
    for is_dir, name in _entries(list_directory(path=root)):
        if is_dir:
            continue
        try:
            body = _text(read_text_file(path=posixpath.join(root, name)))
        except Exception:
            continue
        if needle in body.lower():
            hits.append(name)
    print("\n".join(sorted(hits)) if hits else "no file contains " + repr(needle))
  PY
}

rule "write_file" {
  description = "Write text to a file"
  pattern     = "(?i)^(?:write|save|put) [\"'](?P<content>.*)[\"'] (?:to|into|in) (?:the file )?(?P<path>[^\\s?]+)\\s*[.!]?$"
  requires    = ["filesystem/write_file", "filesystem/create_directory"]
  examples    = ["write \"hello\" to notes/hello.txt", "save 'buy milk' into notes/todo.txt"]
  template    = <<-PY
    {{ template "fs" . }}
    from servers.filesystem import create_directory, write_file

    target = _path({{ .path }})
    # create_directory is mkdir -p on the server: a no-op when it exists.
    create_directory(path=posixpath.dirname(target))
    write_file(path=target, content={{ .content }})
    print("wrote", len({{ .content }}), "characters to", {{ .path }})
  PY
}

# Counting words and summarising CSV use the shipped local tools
# (servers/textutils), which run in the program itself: no tool call.

rule "word_count" {
  description = "Count the words of a file and list the most frequent ones"
  pattern     = "(?i)^(?:(?:count|how many) (?:the )?words (?:are )?(?:there )?(?:in|of) |(?:the )?word count (?:of|for) |(?:what are )?(?:the )?(?:most (?:common|frequent)|top) words (?:in|of) )(?:the file )?(?P<path>[^\\s?]+\\.[A-Za-z0-9]+)\\s*[?.!]?$"
  requires    = ["filesystem/read_text_file"]
  examples    = ["count the words in notes/todo.txt", "how many words are in report.md?", "most common words in notes/todo.txt"]
  template    = <<-PY
    {{ template "fs" . }}
    from servers.filesystem import read_text_file
    from servers.textutils import word_count

    counts = word_count(_text(read_text_file(path=_path({{ .path }}))), top=5)
    print(f"{counts['words']} words ({counts['unique']} distinct) in {counts['lines']} lines")
    if counts["top"]:
        print("most frequent: " + ", ".join(f"{w} ({n})" for w, n in counts["top"]))
  PY
}

rule "csv_summary" {
  description = "Summarise a CSV file column by column"
  pattern     = "(?i)^(?:summari[sz]e|describe|(?:give me )?(?:a )?summary of|what is in|what's in) (?:the )?(?:csv )?(?:file )?(?P<path>[^\\s?]+\\.(?:csv|tsv))\\s*[?.!]?$"
  requires    = ["filesystem/read_text_file"]
  examples    = ["summarize data/sales.csv", "describe the csv file reports/q3.csv", "what is in data/sales.csv?"]
  template    = <<-PY
    {{ template "fs" . }}
    from servers.filesystem import read_text_file
    from servers.textutils import csv_summary

    summary = csv_summary(_text(read_text_file(path=_path({{ .path }}))))
    print(f"{summary['rows']} rows, {len(summary['columns'])} columns")
    for c in summary["columns"]:
        if "mean" in c:
            detail = f"min {c['min']:g}, max {c['max']:g}, mean {c['mean']:.4g}, sum {c['sum']:g}"
        elif c.get("top"):
            detail = "most common: " + ", ".join(f"{v} ({n})" for v, n in c["top"])
        else:
            detail = "empty"
        print(f"- {c['name']} ({c['type']}, {c['empty']} empty): {detail}")
  PY
}
