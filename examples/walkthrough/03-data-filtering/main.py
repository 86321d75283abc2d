# Filter large tool results inside the sandbox: the program reads a big
# file through the filesystem server, keeps the few rows that matter and
# prints a summary. The model would read the summary, not the file.
from servers.filesystem import create_directory, read_text_file, write_file

# A 2,000-row CSV to work on (written through the server, as an agent's
# earlier step or another system would have left it).
rows = ["order,region,amount"]
for i in range(2000):
    rows.append(f"{i},{['north', 'south', 'east', 'west'][i % 4]},{(i * 37) % 1000}")
create_directory(path="walkthrough")
write_file(path="walkthrough/orders.csv", content="\n".join(rows) + "\n")

text = read_text_file(path="walkthrough/orders.csv")["content"]
records = [dict(zip(("order", "region", "amount"), l.split(","))) for l in text.splitlines()[1:]]
big = [r for r in records if r["region"] == "north" and int(r["amount"]) >= 990]
totals = {}
for r in records:
    totals[r["region"]] = totals.get(r["region"], 0) + int(r["amount"])

out = [
    f"tool result: {len(text)} characters, {len(records)} rows",
    f"north orders of 990 or more: {len(big)}: " + ", ".join(r["order"] for r in big),
    "total per region: " + ", ".join(f"{k}={v}" for k, v in sorted(totals.items())),
]
out.append(f"printed {sum(len(l) + 1 for l in out)} characters instead of {len(text)}")
print("\n".join(out))
