# Two kinds of files: the filesystem server's (through tool calls, on the
# host folder it serves) and the workspace's (/workspace, plain Python I/O,
# private to the tenant and kept between executions).
import json
import os

from servers.filesystem import (create_directory, directory_tree, edit_file,
                                get_file_info, read_text_file, search_files,
                                write_file)

create_directory(path="walkthrough")
write_file(path="walkthrough/shopping.txt", content="apples: 3\nbananas: 6\n")
print("wrote:", read_text_file(path="walkthrough/shopping.txt")["content"].splitlines())

diff = edit_file(path="walkthrough/shopping.txt", edits=[{"oldText": "apples: 3", "newText": "apples: 5"}])
print("edit_file diff:", [l for l in diff["content"].splitlines() if l[:1] in ("+", "-") and l[:3] not in ("+++", "---")])
print("after edit:", read_text_file(path="walkthrough/shopping.txt")["content"].splitlines())

info = dict(l.split(": ", 1) for l in get_file_info(path="walkthrough/shopping.txt")["content"].splitlines())
print("get_file_info size:", info["size"], "isFile:", info["isFile"])
print("search_files *.txt under notes:", sorted(os.path.basename(p) for p in search_files(path="notes", pattern="*.txt")["content"].splitlines()))
tree = json.loads(directory_tree(path="notes")["content"])
print("directory_tree of notes:", [e["name"] for e in tree])

# The workspace: ordinary files, no tool call.
os.makedirs("/workspace/walkthrough", exist_ok=True)
with open("/workspace/walkthrough/log.txt", "a") as f:
    f.write("one more run\n")
with open("/workspace/walkthrough/log.txt") as f:
    print("workspace file /workspace/walkthrough/log.txt has", len(f.readlines()), "line(s); it grows by one per run")
