# Another execution, in another sandbox, reads the state back: no tool call.
import os
import cexec

state = cexec.get_state("walkthrough-colors.json")
print("loaded colors:", state["colors"], "after", state["runs"], "save(s)")
print("it is a file in /workspace/state:", os.path.exists("/workspace/state/walkthrough-colors.json"))
print("missing state with a default:", cexec.get_state("walkthrough-nothing.json", default="(none)"))
