import cexec

code = '''
"""Read notes written as "key: value" lines."""
from servers.filesystem import list_directory, read_text_file


def read_notes(folder: str = "notes") -> dict[str, dict[str, str]]:
    """Every note in folder as {file name: {key: value}}."""
    out = {}
    for line in list_directory(path=folder)["content"].splitlines():
        name = line.removeprefix("[FILE] ")
        text = read_text_file(path=f"{folder}/{name}")["content"]
        out[name] = dict(l.split(": ", 1) for l in text.splitlines() if ": " in l)
    return out
'''
saved = cexec.save_skill("note_fields", "Read key: value notes from a folder", code)
print("saved skill", saved["name"], "import as:", saved["import"])
