package pipeline

// spanName names an execution's span: what the agent or operator asked for.
func spanName(req CodeRequest) string {
	if req.call != nil {
		return "call_tool"
	}
	return "execute_code"
}
