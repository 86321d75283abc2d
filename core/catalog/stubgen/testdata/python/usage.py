"""Agent-style code against the generated stubs. mypy --strict must accept it except on the
lines marked "# E: <code>", and must report exactly those."""
from typing import Any

from servers.everything import get_structured_content, get_sum
from servers.filesystem import edit_file, read_text_file
from servers.kitchen_sink import _2fa, get_data_2, list_, passthrough, search_items, store_json
from servers.kitchen_sink import no_such_tool  # E: attr-defined
from servers.memory import create_entities, read_graph

text: str = read_text_file(path="/data/a.txt", head=10)["content"]
edit_file(path="/data/a.txt", edits=[{"oldText": "a", "newText": "b"}], dryRun=True)
graph = read_graph()
names: list[str] = [e["name"] for e in graph["entities"]]
create_entities(entities=[{"name": "n", "entityType": "t", "observations": []}])
temperature: float = get_structured_content(location="Chicago")["temperature"]
total: Any = get_sum(a=1, b=2.5)
hits = search_items(
    query="q",
    from_="k",
    tree={"name": "root", "children": [{"name": "leaf"}]},
    sort="asc",
    mode="exact",
    max_results=3,
    filter={"a-b": 1, "range": {"lo": 0.5}},
    shape={"kind": "circle", "r": 2},
    datum={"name": "x", "value": 1},
    level=None,
)
first: str = hits["items"][0]["id"]
store_json(value={"a": [1, "x", None, {"b": True}]}, wrap={"inner": {"label": "x"}})
passthrough(id="x", anything=1)
list_(dict_="d")
get_data_2()
_2fa(code="123456")

read_text_file(path=1)  # E: arg-type
get_structured_content(location="Paris")  # E: arg-type
edit_file(path="a", edits=[{"oldText": "a"}])  # E: typeddict-item
search_items(query="q", from_="k", tree={"name": "r"}, mode="slow")  # E: arg-type
read_text_file("/positional")  # E: misc
bad: int = read_text_file(path="x")["content"]  # E: assignment
list_(dict="d")  # E: call-arg
