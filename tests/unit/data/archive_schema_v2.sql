BEGIN TRANSACTION;
CREATE TABLE edits (
	id VARCHAR NOT NULL, 
	run_id VARCHAR, 
	round INTEGER NOT NULL, 
	parent_id VARCHAR NOT NULL, 
	child_id VARCHAR, 
	patch JSON NOT NULL, 
	rationale VARCHAR NOT NULL, 
	direction VARCHAR NOT NULL, 
	status VARCHAR NOT NULL, 
	reason VARCHAR NOT NULL, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "edits" VALUES('vace-0001-r0-c1-v0','vace-0001',0,'60e7371a07869038448ea5c787800714156ca69fb203ce66b7a12b2c540f7bd9','c1','[{"op":"replace","path":"/name","value":"h1"}]','','','accepted','',1764547201.0);
CREATE TABLE evaluations (
	id VARCHAR NOT NULL, 
	run_id VARCHAR, 
	harness_id VARCHAR NOT NULL, 
	checkpoint_id VARCHAR NOT NULL, 
	env VARCHAR NOT NULL, 
	split VARCHAR NOT NULL, 
	seeds JSON NOT NULL, 
	k INTEGER NOT NULL, 
	task_ids JSON NOT NULL, 
	aggregates JSON NOT NULL, 
	status VARCHAR NOT NULL, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "evaluations" VALUES('ev1','vace-0001','60e7371a07869038448ea5c787800714156ca69fb203ce66b7a12b2c540f7bd9','ck1','toy','val','[0]',1,'["task-1"]','{"pass_at_k":1.0}','done',1764547203.0);
CREATE TABLE gate_decisions (
	id VARCHAR NOT NULL, 
	run_id VARCHAR, 
	round INTEGER NOT NULL, 
	incumbent_id VARCHAR NOT NULL, 
	candidate_id VARCHAR NOT NULL, 
	b FLOAT NOT NULL, 
	c FLOAT NOT NULL, 
	accepted BOOLEAN NOT NULL, 
	reason VARCHAR NOT NULL, 
	pairs JSON NOT NULL, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "gate_decisions" VALUES('g1','vace-0001',0,'60e7371a07869038448ea5c787800714156ca69fb203ce66b7a12b2c540f7bd9','c1',0.4,0.6,1,'c > b','[]',1764547204.0);
CREATE TABLE harnesses (
	id VARCHAR NOT NULL, 
	spec JSON NOT NULL, 
	parents JSON NOT NULL, 
	origin VARCHAR NOT NULL, 
	run_id VARCHAR, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "harnesses" VALUES('60e7371a07869038448ea5c787800714156ca69fb203ce66b7a12b2c540f7bd9','{"schema_version":1,"name":"h0","description":"","parents":[],"prompt":{"system":"You are a helpful agent.","task_framing":"{task}","action_guidance":"","output_format":"","rules":{}},"skills":{},"context":{"history_turns":null,"tool_output_chars":null},"memory":{"scratchpad":false,"lessons":[]},"hooks":{},"tool_view":{"exposed":null,"renames":{},"descriptions":{},"output_format":"raw"},"parser":{"mode":"native","final_answer_pattern":"(?is)final answer\\s*:\\s*(.+)","on_no_action":"finish","violation_message":"Your reply could not be parsed. Follow the output format exactly.","strip_code_fences":false},"budget":{"max_model_calls":32,"max_env_actions":30,"max_context_tokens":65532,"max_output_tokens":8192},"decoding":{"temperature":1.0,"top_p":1.0,"seed":null}}','[]','base','vace-0001',1.79609430813834905623e+09);
CREATE TABLE llm_calls (
	id VARCHAR NOT NULL, 
	run_id VARCHAR, 
	role VARCHAR NOT NULL, 
	model VARCHAR NOT NULL, 
	input_tokens INTEGER NOT NULL, 
	output_tokens INTEGER NOT NULL, 
	cost_usd FLOAT NOT NULL, 
	latency_s FLOAT NOT NULL, 
	request JSON NOT NULL, 
	response JSON NOT NULL, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "llm_calls" VALUES('l1','vace-0001','editor','gpt',10,5,0.001,0.0,'{}','{}',1764547206.0);
CREATE TABLE policy_checkpoints (
	id VARCHAR NOT NULL, 
	base_model VARCHAR NOT NULL, 
	adapter_path VARCHAR, 
	parents JSON NOT NULL, 
	config JSON NOT NULL, 
	metrics JSON NOT NULL, 
	run_id VARCHAR, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "policy_checkpoints" VALUES('ck1','smollm2-135m','/a','["base"]','{"lr":0.00001}','{"loss":0.5}','vace-0001',1764547202.0);
CREATE TABLE profiles (
	id VARCHAR NOT NULL, 
	run_id VARCHAR, 
	round INTEGER NOT NULL, 
	harness_id VARCHAR NOT NULL, 
	checkpoint_id VARCHAR NOT NULL, 
	profile JSON NOT NULL, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "profiles" VALUES('p1','vace-0001',0,'60e7371a07869038448ea5c787800714156ca69fb203ce66b7a12b2c540f7bd9','','{"add":0.9}',1764547205.0);
CREATE TABLE runs (
	id VARCHAR NOT NULL, 
	strategy VARCHAR NOT NULL, 
	config JSON NOT NULL, 
	status VARCHAR NOT NULL, 
	created_at FLOAT NOT NULL, 
	updated_at FLOAT NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "runs" VALUES('vace-0001','vace','{"rounds":2,"db":"x.db"}','done',1764547200.25,1764547260.5);
CREATE TABLE schema_version (
	id INTEGER NOT NULL, 
	version INTEGER NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "schema_version" VALUES(1,2);
CREATE TABLE tasks (
	id VARCHAR NOT NULL, 
	env VARCHAR NOT NULL, 
	split VARCHAR NOT NULL, 
	prompt VARCHAR NOT NULL, 
	task_metadata JSON NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "tasks" VALUES('q1','toy','val','2+3?','{"family":"add"}');
CREATE TABLE trajectories (
	id VARCHAR NOT NULL, 
	evaluation_id VARCHAR, 
	run_id VARCHAR, 
	task_id VARCHAR NOT NULL, 
	env VARCHAR NOT NULL, 
	split VARCHAR NOT NULL, 
	harness_id VARCHAR NOT NULL, 
	checkpoint_id VARCHAR NOT NULL, 
	seed INTEGER NOT NULL, 
	final_answer VARCHAR, 
	stop_reason VARCHAR NOT NULL, 
	interface_violations INTEGER NOT NULL, 
	violation_turns INTEGER NOT NULL, 
	model_turns INTEGER NOT NULL, 
	env_actions INTEGER NOT NULL, 
	reward FLOAT NOT NULL, 
	passed BOOLEAN NOT NULL, 
	latency_s FLOAT NOT NULL, 
	input_tokens INTEGER NOT NULL, 
	output_tokens INTEGER NOT NULL, 
	cost_usd FLOAT NOT NULL, 
	body TEXT NOT NULL, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "trajectories" VALUES('t1','ev1','vace-0001','task-1','toy','val','hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh','ck',3,'5','final_answer',1,0,4,4,0.75,1,0.2,408,76,0.0,'{"id":"t1","task_id":"task-1","env":"toy","split":"val","harness_id":"hhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhhh","checkpoint_id":"ck","seed":3,"messages":[{"type":"tool","data":{"content":"5","additional_kwargs":{},"response_metadata":{},"type":"tool","name":null,"id":null,"tool_call_id":"c3","artifact":null,"status":"success"}}],"final_answer":"5","stop_reason":"final_answer","hook_events":[{"event":"after_tool","hook":"warn"}],"interface_violations":1,"violation_turns":0,"model_turns":4,"env_actions":4,"reward":0.75,"passed":true,"score_detail":{"expected_type":"int"},"latency_s":0.2,"messages_ref":9,"calls":[{"input":[{"type":"system","data":{"content":"Use the tools.","additional_kwargs":{},"response_metadata":{},"type":"system","name":null,"id":null}},{"type":"human","data":{"content":"Add 2 and 3.","additional_kwargs":{},"response_metadata":{},"type":"human","name":null,"id":null}}],"output":{"type":"ai","data":{"content":"calling add, turn 0","additional_kwargs":{},"response_metadata":{"coevo_tokens":"@call"},"type":"ai","name":null,"id":null,"tool_calls":[{"name":"add","args":{"a":2,"b":0},"id":"c0","type":"tool_call"}],"invalid_tool_calls":[],"usage_metadata":null}},"prompt_token_ids":[60,124,115,121,115,116,101,109,124,62,85,115,101,32,116,104,101,32,116,111,111,108,115,46,60,124,104,117,109,97,110,124,62,65,100,100,32,50,32,97,110,100,32,51,46,60,124,97,105,124,62],"completion_token_ids":[99,97,108,108,105,110,103,32,97,100,100,44,32,116,117,114,110,32,48],"logprobs":[-0.25,-0.26,-0.27,-0.28,-0.29,-0.3,-0.31,-0.32,-0.33,-0.33999999999999997,-0.35,-0.36,-0.37,-0.38,-0.39,-0.4,-0.41000000000000003,-0.42000000000000004,-0.43],"input_tokens":51,"output_tokens":19,"cost_usd":0.0,"latency_s":0.05,"input_ref":0},{"input":[{"type":"tool","data":{"content":"2","additional_kwargs":{},"response_metadata":{},"type":"tool","name":null,"id":null,"tool_call_id":"c0","artifact":null,"status":"success"}}],"output":{"type":"ai","data":{"content":"calling add, turn 1","additional_kwargs":{},"response_metadata":{"coevo_tokens":"@call"},"type":"ai","name":null,"id":null,"tool_calls":[{"name":"add","args":{"a":2,"b":1},"id":"c1","type":"tool_call"}],"invalid_tool_calls":[],"usage_metadata":null}},"prompt_token_ids":[60,124,116,111,111,108,124,62,50,60,124,97,105,124,62],"completion_token_ids":[99,97,108,108,105,110,103,32,97,100,100,44,32,116,117,114,110,32,49],"logprobs":[-0.25,-0.26,-0.27,-0.28,-0.29,-0.3,-0.31,-0.32,-0.33,-0.33999999999999997,-0.35,-0.36,-0.37,-0.38,-0.39,-0.4,-0.41000000000000003,-0.42000000000000004,-0.43],"input_tokens":85,"output_tokens":19,"cost_usd":0.0,"latency_s":0.05,"input_ref":3,"prompt_ref":70},{"input":[{"type":"tool","data":{"content":"3","additional_kwargs":{},"response_metadata":{},"type":"tool","name":null,"id":null,"tool_call_id":"c1","artifact":null,"status":"success"}}],"output":{"type":"ai","data":{"content":"calling add, turn 2","additional_kwargs":{},"response_metadata":{"coevo_tokens":"@call"},"type":"ai","name":null,"id":null,"tool_calls":[{"name":"add","args":{"a":2,"b":2},"id":"c2","type":"tool_call"}],"invalid_tool_calls":[],"usage_metadata":null}},"prompt_token_ids":[60,124,116,111,111,108,124,62,51,60,124,97,105,124,62],"completion_token_ids":[99,97,108,108,105,110,103,32,97,100,100,44,32,116,117,114,110,32,50],"logprobs":[-0.25,-0.26,-0.27,-0.28,-0.29,-0.3,-0.31,-0.32,-0.33,-0.33999999999999997,-0.35,-0.36,-0.37,-0.38,-0.39,-0.4,-0.41000000000000003,-0.42000000000000004,-0.43],"input_tokens":119,"output_tokens":19,"cost_usd":0.0,"latency_s":0.05,"input_ref":5,"prompt_ref":104},{"input":[{"type":"tool","data":{"content":"4","additional_kwargs":{},"response_metadata":{},"type":"tool","name":null,"id":null,"tool_call_id":"c2","artifact":null,"status":"success"}}],"output":{"type":"ai","data":{"content":"calling add, turn 3","additional_kwargs":{},"response_metadata":{"coevo_tokens":"@call"},"type":"ai","name":null,"id":null,"tool_calls":[{"name":"add","args":{"a":2,"b":3},"id":"c3","type":"tool_call"}],"invalid_tool_calls":[],"usage_metadata":null}},"prompt_token_ids":[60,124,116,111,111,108,124,62,52,60,124,97,105,124,62],"completion_token_ids":[99,97,108,108,105,110,103,32,97,100,100,44,32,116,117,114,110,32,51],"logprobs":[-0.25,-0.26,-0.27,-0.28,-0.29,-0.3,-0.31,-0.32,-0.33,-0.33999999999999997,-0.35,-0.36,-0.37,-0.38,-0.39,-0.4,-0.41000000000000003,-0.42000000000000004,-0.43],"input_tokens":153,"output_tokens":19,"cost_usd":0.0,"latency_s":0.05,"input_ref":7,"prompt_ref":138}]}',1.79609430814505505562e+09);
CREATE INDEX ix_harnesses_run_id ON harnesses (run_id);
CREATE INDEX ix_edits_parent_id ON edits (parent_id);
CREATE INDEX ix_edits_run_id ON edits (run_id);
CREATE INDEX ix_policy_checkpoints_run_id ON policy_checkpoints (run_id);
CREATE INDEX ix_tasks_env ON tasks (env);
CREATE INDEX ix_evaluations_run_id ON evaluations (run_id);
CREATE INDEX ix_evaluations_harness_id ON evaluations (harness_id);
CREATE INDEX ix_trajectories_evaluation_id ON trajectories (evaluation_id);
CREATE INDEX ix_trajectories_harness_id ON trajectories (harness_id);
CREATE INDEX ix_trajectories_task_id ON trajectories (task_id);
CREATE INDEX ix_trajectories_run_id ON trajectories (run_id);
CREATE INDEX ix_gate_decisions_run_id ON gate_decisions (run_id);
CREATE INDEX ix_profiles_harness_id ON profiles (harness_id);
CREATE INDEX ix_profiles_run_id ON profiles (run_id);
CREATE INDEX ix_llm_calls_run_id ON llm_calls (run_id);
COMMIT;
