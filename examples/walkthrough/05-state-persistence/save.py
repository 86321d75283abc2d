# Save a result as state: a JSON file in the tenant's workspace, written
# atomically, that later executions (and `cexecctl state get`) read.
import cexec
from servers.filesystem import read_text_file

colors = {}
for name in ["apple", "banana"]:
    fields = dict(l.split(": ", 1) for l in read_text_file(path=f"notes/{name}.txt")["content"].splitlines())
    colors[fields["fruit"]] = fields["color"]
runs = cexec.get_state("walkthrough-colors.json", default={}).get("runs", 0)
print("saved:", cexec.save_state("walkthrough-colors.json", {"colors": colors, "runs": runs + 1}))
