//! `FnTool`: a tool made from a name, a description, a JSON Schema and an async function over a typed input.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use noeta_core::{Tool, ToolContext, ToolError, ToolFlags, ToolOutput};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The future an [`FnTool`] function returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send>>;

type RunFn<I> = dyn Fn(I, ToolContext) -> ToolFuture + Send + Sync;

/// A tool whose input is deserialised into `I` before the function runs.
///
/// Input that does not deserialise becomes an error result the model sees,
/// naming the tool and the serde error, so a tool body only handles valid input.
pub struct FnTool<I> {
    name: String,
    description: String,
    schema: Value,
    flags: ToolFlags,
    run: Arc<RunFn<I>>,
    _input: PhantomData<fn(I)>,
}

impl<I> fmt::Debug for FnTool<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.name)
            .field("flags", &self.flags)
            .finish_non_exhaustive()
    }
}

impl<I: DeserializeOwned + Send + 'static> FnTool<I> {
    /// A tool called `name`, described by `description`, whose input follows `schema`.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        schema: Value,
        run: impl Fn(I, ToolContext) -> ToolFuture + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            schema,
            flags: ToolFlags::default(),
            run: Arc::new(run),
            _input: PhantomData,
        }
    }

    /// Sets the tool's flags.
    pub fn with_flags(mut self, flags: ToolFlags) -> Self {
        self.flags = flags;
        self
    }
}

#[async_trait]
impl<I: DeserializeOwned + Send + 'static> Tool for FnTool<I> {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn flags(&self) -> ToolFlags {
        self.flags.clone()
    }

    async fn run(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let typed: I = serde_json::from_value(input).map_err(|err| {
            ToolError::RespondToModel(format!("{}: invalid input: {err}", self.name))
        })?;
        (self.run)(typed, ctx.clone()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize)]
    struct Add {
        a: i64,
        b: i64,
    }

    fn adder() -> FnTool<Add> {
        FnTool::new(
            "Add",
            "Adds two integers.",
            json!({"type": "object", "required": ["a", "b"]}),
            |input: Add, _ctx| {
                Box::pin(async move { Ok(ToolOutput::text((input.a + input.b).to_string())) })
            },
        )
    }

    #[test]
    fn runs_the_function_on_typed_input() {
        let out = futures::executor::block_on(
            adder().run(json!({"a": 2, "b": 3}), &ToolContext::new("t", "c")),
        );
        assert_eq!(out, Ok(ToolOutput::text("5")));
    }

    #[test]
    fn bad_input_is_an_error_the_model_sees_naming_the_tool() {
        let out = futures::executor::block_on(
            adder().run(json!({"a": "two"}), &ToolContext::new("t", "c")),
        );
        match out {
            Err(ToolError::RespondToModel(message)) => {
                assert!(message.starts_with("Add: invalid input:"), "{message}");
            }
            other => panic!("expected a model-visible error, got {other:?}"),
        }
    }
}
