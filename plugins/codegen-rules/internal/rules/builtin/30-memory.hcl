# Remembering and recalling, through the memory reference server
# (@modelcontextprotocol/server-memory, a knowledge graph of entities with
# observations).

snippet "mem" {
  source = <<-PY
    def _entities(result):
        if isinstance(result, dict):
            return list(result.get("entities") or [])
        return []
  PY
}

rule "remember" {
  description = "Remember a fact about someone or something"
  pattern     = "(?i)^remember that (?P<name>[^\\s]+(?: [A-Z][^\\s]*)?) (?P<fact>(?:is|was|has|had|works|worked|likes|loves|lives|lived|owns|speaks|studies|prefers|uses|knows)\\b.+?)\\s*[.!]?$"
  requires    = ["memory/create_entities", "memory/add_observations", "memory/open_nodes"]
  examples    = ["remember that Alice works at Acme", "remember that Bob Smith likes tea."]
  template    = <<-PY
    {{ template "mem" . }}
    from servers.memory import add_observations, create_entities, open_nodes

    name, fact = {{ .name }}, {{ .fact }}
    if _entities(open_nodes(names=[name])):
        add_observations(observations=[{"entityName": name, "contents": [fact]}])
    else:
        create_entities(entities=[{"name": name, "entityType": "entity", "observations": [fact]}])
    print("remembered:", name, fact)
  PY
}

rule "recall" {
  description = "Recall what is known about someone or something"
  # Only questions about memory: "who is X" or "what is X" are factual
  # questions, which an empty recall would answer wrongly.
  pattern     = "(?i)^(?:what do you (?:know|remember) about|what did I tell you about|recall|tell me what you (?:know|remember) about) (?P<name>[^?]+?)\\s*\\??$"
  requires    = ["memory/open_nodes", "memory/search_nodes"]
  examples    = ["what do you know about Alice?", "recall Bob Smith"]
  template    = <<-PY
    {{ template "mem" . }}
    from servers.memory import open_nodes, search_nodes

    name = {{ .name }}
    found = _entities(open_nodes(names=[name])) or _entities(search_nodes(query=name))
    if not found:
        print("nothing is remembered about", name)
    for e in found:
        print(e["name"] + ": " + "; ".join(e.get("observations") or []))
  PY
}

rule "list_memory" {
  description = "List everything remembered"
  pattern     = "(?i)^(?:what do you remember|list (?:all |everything )?(?:you remember|memories|entities|that you remember)|show (?:all )?memories)\\s*\\??$"
  requires    = ["memory/read_graph"]
  examples    = ["what do you remember?", "list all memories"]
  template    = <<-PY
    {{ template "mem" . }}
    from servers.memory import read_graph

    entities = _entities(read_graph())
    for e in sorted(entities, key=lambda e: e["name"]):
        print(e["name"] + ": " + "; ".join(e.get("observations") or []))
    if not entities:
        print("nothing is remembered yet")
  PY
}

rule "forget" {
  description = "Forget someone or something"
  pattern     = "(?i)^forget (?:about |everything about )?(?P<name>[^?.!]+?)\\s*[.!]?$"
  requires    = ["memory/delete_entities"]
  examples    = ["forget Alice", "forget about Bob Smith"]
  template    = <<-PY
    from servers.memory import delete_entities

    delete_entities(entityNames=[{{ .name }}])
    print("forgot", {{ .name }})
  PY
}
