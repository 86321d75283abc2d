# Reads `cexecctl config show --json` and prints the parts a user tunes.
import json
import sys

c = json.load(sys.stdin)["config"]
print("pipeline:", json.dumps(c["pipeline"], sort_keys=True))
print("plugins:", ", ".join(f"{p['kind']}/{p['name']}" for p in c["plugins"]))
print("servers:", ", ".join(f"{s['name']} ({s['scope']})" for s in c["mcp_servers"]))
print("sandbox limits:", json.dumps(c["sandbox"]["limits"], sort_keys=True))
