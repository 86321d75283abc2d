# Session "walkthrough-day2", a new sandbox: what day 1 stored is still there.
import cexec
from servers.filesystem import read_text_file
from servers.memory import add_observations, open_nodes

progress = cexec.get_state("walkthrough-progress.json")
print("day 2: state says done =", progress["done"])
color = read_text_file(path="notes/carrot.txt")["content"].splitlines()[1]
add_observations(observations=[{"entityName": "walkthrough-project", "contents": [f"carrot has {color}"]}])
project = open_nodes(names=["walkthrough-project"])["entities"][0]
print("day 2: memory graph holds", sorted(set(project["observations"])))
