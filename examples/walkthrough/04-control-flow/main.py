# Loops, branches and error handling are plain Python around tool calls:
# one execution does what would take an agent many turns.
import cexec
from servers.filesystem import list_directory, read_text_file

# A loop with a branch per file.
kinds = {}
for line in list_directory(path="notes")["content"].splitlines():
    name = line.removeprefix("[FILE] ")
    first = read_text_file(path="notes/" + name, head=1)["content"]
    kind = first.split(":", 1)[0]
    kinds.setdefault(kind, []).append(name)
for kind, names in sorted(kinds.items()):
    print(f"{kind}: {', '.join(sorted(names))}")

# A tool error is an exception the program can handle.
try:
    read_text_file(path="notes/missing.txt")
except cexec.ToolError as e:
    print("handled ToolError:", str(e).splitlines()[0][:80])

# Fall back when the first choice does not exist.
for candidate in ["notes/today.txt", "notes/apple.txt"]:
    try:
        text = read_text_file(path=candidate)["content"]
    except cexec.ToolError:
        print(f"no {candidate}, trying the next")
        continue
    print(f"fell back to {candidate}: {text.splitlines()[0]}")
    break

# Stop early: read more lines only until the one wanted shows up.
n = 0
while True:
    n += 1
    head = read_text_file(path="notes/banana.txt", head=n)["content"]
    if "color" in head:
        break
print(f"while loop found the color after reading {n} lines: {head.splitlines()[-1]}")
