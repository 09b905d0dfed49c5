//! A tool served by a plugin program: `tool/run`, `tool/resume` and `tool/recover`, each with
//! the call's idempotency key. A tool call has no deadline of its own (it runs as long as the
//! work takes); a cancelled task tells the program with `$/cancel`.

use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::records::Wake;
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde_json::{Value, json};

use crate::extension::tool_error;
use crate::protocol::{self, ToolSpec};
use crate::supervisor::Supervisor;

/// One tool of one export.
pub(crate) struct ProcessTool {
    supervisor: Arc<Supervisor>,
    export: String,
    spec: ToolSpec,
}

impl ProcessTool {
    pub(crate) fn new(supervisor: Arc<Supervisor>, export: String, spec: ToolSpec) -> Self {
        Self {
            supervisor,
            export,
            spec,
        }
    }

    fn context(&self, ctx: &ToolContext) -> Value {
        json!({
            "task": ctx.task_id(),
            "call_id": ctx.call_id(),
            "idempotency_key": ctx.idempotency_key(),
            "workspace": ctx.exec_env().map(|e| e.workspace().display().to_string()),
            "state": ctx.state(&self.export).cloned().unwrap_or(Value::Null),
        })
    }

    async fn call(
        &self,
        method: &str,
        mut params: Value,
        ctx: &ToolContext,
    ) -> Result<Value, ToolError> {
        params["export"] = Value::from(self.export.clone());
        params["tool"] = Value::from(self.spec.name.clone());
        params["context"] = self.context(ctx);
        let serve = |method: &str, params: &Value| {
            protocol::serve(&ctx.core().messages, ctx, method, params)
        };
        let notices = |method: &str, params: &Value| {
            if method == "tool/progress"
                && let Some(text) = params.get("text").and_then(Value::as_str)
            {
                ctx.progress(text);
            }
        };
        let answer = self
            .supervisor
            .call(method, &params, None, &serve, &notices)
            .await
            .map_err(|err| tool_error(self.supervisor.plugin(), &self.spec.name, err))?;
        let fail = |problem: String| {
            ToolError::Fatal(format!(
                "plugin `{}`: tool `{}`: the program's answer to `{method}` is malformed: {problem}",
                self.supervisor.plugin(),
                self.spec.name
            ))
        };
        for (kind, data, _message) in protocol::records(&answer).map_err(fail)? {
            ctx.record(&self.export, &kind, data);
        }
        Ok(answer)
    }

    fn read_output(&self, method: &str, value: &Value) -> Result<ToolOutput, ToolError> {
        protocol::output(value).map_err(|problem| {
            ToolError::Fatal(format!(
                "plugin `{}`: tool `{}`: the program's answer to `{method}` is malformed: {problem}",
                self.supervisor.plugin(),
                self.spec.name
            ))
        })
    }
}

#[async_trait]
impl Tool for ProcessTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn description(&self) -> &str {
        &self.spec.description
    }

    fn input_schema(&self) -> Value {
        self.spec.input_schema.clone()
    }

    fn flags(&self) -> ToolFlags {
        self.spec.flags.clone()
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let answer = self.call("tool/run", json!({"input": input}), ctx).await?;
        self.read_output("tool/run", &answer)
    }

    async fn resume(
        &self,
        input: Value,
        wake: Wake,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        if !self.spec.resumes {
            return Err(ToolError::Fatal(format!(
                "{} parked but its program does not implement `tool/resume`",
                self.spec.name
            )));
        }
        let answer = self
            .call("tool/resume", json!({"input": input, "wake": wake}), ctx)
            .await?;
        self.read_output("tool/resume", &answer)
    }

    async fn recover(&self, ctx: &ToolContext) -> Result<Option<ToolOutput>, ToolError> {
        if !self.spec.recovers {
            return Ok(None);
        }
        let answer = self.call("tool/recover", json!({}), ctx).await?;
        match answer.get("output").filter(|o| !o.is_null()) {
            None => Ok(None),
            Some(output) => self.read_output("tool/recover", output).map(Some),
        }
    }
}
