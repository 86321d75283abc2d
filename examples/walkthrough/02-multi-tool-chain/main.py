# Three tools of two servers in one program: list a folder, read each note,
# and store what was found in the memory server's knowledge graph. The
# intermediate results never leave the sandbox; only the last print does.
from servers.filesystem import list_directory, read_text_file
from servers.memory import create_entities, open_nodes

fruits = {}
listing = list_directory(path="notes")["content"]
for line in listing.splitlines():
    name = line.removeprefix("[FILE] ")
    text = read_text_file(path="notes/" + name)["content"]
    fields = dict(l.split(": ", 1) for l in text.splitlines())
    if "fruit" in fields:
        fruits[fields["fruit"]] = fields["color"]

create_entities(entities=[
    {"name": f, "entityType": "fruit", "observations": ["color: " + c]}
    for f, c in fruits.items()
])
graph = open_nodes(names=sorted(fruits))
for e in graph["entities"]:
    print(f"memory now knows {e['name']} ({e['entityType']}): {', '.join(e['observations'])}")
print(f"chain: list_directory -> {len(listing.splitlines())} x read_text_file -> create_entities -> open_nodes")
