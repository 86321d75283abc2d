# Session "walkthrough-day1": gather facts, keep them in the memory server's
# graph and in state, and leave a checkpoint saying where the work stopped.
import cexec
from servers.filesystem import read_text_file
from servers.memory import add_observations, create_entities

create_entities(entities=[{"name": "walkthrough-project", "entityType": "project", "observations": []}])
done = []
for name in ["apple", "banana"]:
    color = read_text_file(path=f"notes/{name}.txt")["content"].splitlines()[1]
    add_observations(observations=[{"entityName": "walkthrough-project", "contents": [f"{name} has {color}"]}])
    done.append(name)
cexec.save_state("walkthrough-progress.json", {"done": done})
seq = cexec.checkpoint("read two of three notes", {"done": done, "next": "carrot"})
print(f"day 1: read {done}, checkpoint #{seq} says next is carrot")
