package sessions

import (
	"testing"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
)

func TestProtoJSON(t *testing.T) {
	e := &cexecv1.SessionEntry{
		Seq: 9007199254740993, TimeUnixMs: 1700000000123, Kind: "execution", Code: "print(\"<1>\")",
		Result:    &cexecv1.SessionResult{Ok: true, Output: "1\n", ValueJson: []byte(`{"big": 12345678901234567890, "a": [1, 2]}`)},
		ToolCalls: []*cexecv1.SessionToolCall{{Server: "s", Tool: "t", DurationMs: 1.5}},
		UpstreamLog: []*cexecv1.SessionUpstreamLog{{Server: "s", Level: "info", DataJson: []byte(`{"msg":"hi"}`)},
			{Server: "s", Level: "debug", Truncated: true}},
	}
	got, err := protoJSON(e.ProtoReflect())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"seq":9007199254740993,"time_unix_ms":1700000000123,"kind":"execution","task":"","code":"print(\"<1>\")",` +
		`"result":{"ok":true,"exit_code":0,"error_type":"","error":"","output":"1\n","value":{"big":12345678901234567890,"a":[1,2]},"timed_out":false},` +
		`"tool_calls":[{"server":"s","tool":"t","duration_ms":1.5,"ok":false,"error":"","approval":""}],"duration_ms":0,"state_files":[],` +
		`"step":"","context":null,"skill":"","truncated":false,"upstream_log":[` +
		`{"server":"s","level":"info","logger":"","data":{"msg":"hi"},"truncated":false,"withheld":false},` +
		`{"server":"s","level":"debug","logger":"","data":null,"truncated":true,"withheld":false}],"interpreter":"","warnings":[]}`
	if string(got) != want {
		t.Errorf("protoJSON =\n%s\nwant\n%s", got, want)
	}
	if _, err := protoJSON((&cexecv1.SessionEntry{ContextJson: []byte("{")}).ProtoReflect()); err == nil {
		t.Error("invalid JSON in context_json passed")
	}
}

func TestProtoJSONResumeWithoutCheckpoint(t *testing.T) {
	got, err := protoJSON((&cexecv1.ResumeSessionResponse{Session: &cexecv1.SessionInfo{Id: "s"}}).ProtoReflect())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"session":{"id":"s","entries":0,"started_unix_ms":0,"last_unix_ms":0,"last_checkpoint":"","executions":0,"failures":0,` +
		`"checkpoints":0,"last_task":"","log_bytes":0,"bad_lines":0,"state_files":[]},"checkpoint":null,"recent":[]}`
	if string(got) != want {
		t.Errorf("protoJSON =\n%s\nwant\n%s", got, want)
	}
}
