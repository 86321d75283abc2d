# The stub turns the MCP tool into a function; the call goes through cexecd
# to the real filesystem server. Relative paths resolve inside its folder.
from servers.filesystem import read_text_file

reply = read_text_file(path="hello.txt")
print("read_text_file returned a", type(reply).__name__, "with keys", sorted(reply))
print("hello.txt says:", reply["content"].strip())
