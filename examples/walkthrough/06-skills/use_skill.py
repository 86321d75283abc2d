from skills.note_fields import read_notes

notes = read_notes()
print("skills.note_fields.read_notes() found", len(notes), "notes")
for name, fields in sorted(notes.items()):
    print(f"  {name}: color {fields['color']}")
