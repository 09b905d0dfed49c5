//! The model catalog: context window and output limit by model-name prefix.
//!
//! The longest matching prefix wins, so `claude-opus-4-6` finds its own entry
//! before `claude-opus-4`. A model the catalog does not know gets 128,000
//! tokens of context and 16,384 of output; `ProviderConfig` can override both.

/// A model's limits, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLimits {
    /// The context window (input and output together).
    pub context_window: u64,
    /// The most output tokens one reply may have.
    pub max_output_tokens: u32,
}

/// The limits of a model the catalog does not know.
pub const UNKNOWN_MODEL: ModelLimits = ModelLimits {
    context_window: 128_000,
    max_output_tokens: 16_384,
};

/// One catalog row.
struct Entry {
    prefix: &'static str,
    context_window: u64,
    max_output_tokens: u32,
    /// OpenAI models that refuse function tools on chat completions while reasoning at their
    /// default effort (GPT-5.2 and later): a request with tools asks for `reasoning_effort: none`.
    tools_without_reasoning: bool,
}

const fn row(prefix: &'static str, context_window: u64, max_output_tokens: u32) -> Entry {
    Entry {
        prefix,
        context_window,
        max_output_tokens,
        tools_without_reasoning: false,
    }
}

const fn reasoning_row(prefix: &'static str, context_window: u64, max_output_tokens: u32) -> Entry {
    Entry {
        prefix,
        context_window,
        max_output_tokens,
        tools_without_reasoning: true,
    }
}

const CATALOG: &[Entry] = &[
    // Anthropic
    row("claude-fable-5", 1_000_000, 128_000),
    row("claude-opus-5", 1_000_000, 128_000),
    row("claude-sonnet-5", 1_000_000, 128_000),
    row("claude-opus-4-8", 1_000_000, 128_000),
    row("claude-opus-4-7", 1_000_000, 128_000),
    row("claude-opus-4-6", 1_000_000, 128_000),
    row("claude-sonnet-4-6", 1_000_000, 128_000),
    row("claude-opus-4-5", 200_000, 64_000),
    row("claude-sonnet-4-5", 200_000, 64_000),
    row("claude-haiku-4-5", 200_000, 64_000),
    row("claude-opus-4", 200_000, 32_000),
    row("claude-sonnet-4", 200_000, 64_000),
    row("claude-3-7-sonnet", 200_000, 64_000),
    row("claude-3-5-sonnet", 200_000, 8_192),
    row("claude-3-5-haiku", 200_000, 8_192),
    row("claude-3-haiku", 200_000, 4_096),
    // OpenAI
    reasoning_row("gpt-6", 1_050_000, 128_000),
    reasoning_row("gpt-5.6", 1_050_000, 128_000),
    reasoning_row("gpt-5.5", 400_000, 128_000),
    reasoning_row("gpt-5.4", 400_000, 128_000),
    reasoning_row("gpt-5.2", 400_000, 128_000),
    row("gpt-5", 400_000, 128_000),
    row("gpt-4.1", 1_047_576, 32_768),
    row("gpt-4o", 128_000, 16_384),
    row("o3", 200_000, 100_000),
    row("o4-mini", 200_000, 100_000),
];

fn entry(model: &str) -> Option<&'static Entry> {
    CATALOG
        .iter()
        .filter(|e| model.starts_with(e.prefix))
        .max_by_key(|e| e.prefix.len())
}

/// The limits of `model`, by the longest catalog prefix it starts with.
pub fn model_limits(model: &str) -> ModelLimits {
    entry(model).map_or(UNKNOWN_MODEL, |e| ModelLimits {
        context_window: e.context_window,
        max_output_tokens: e.max_output_tokens,
    })
}

/// Whether `model` refuses function tools on chat completions unless reasoning is off.
pub(crate) fn tools_without_reasoning(model: &str) -> bool {
    entry(model).is_some_and(|e| e.tools_without_reasoning)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_wins() {
        assert_eq!(model_limits("claude-opus-4-6").max_output_tokens, 128_000);
        assert_eq!(
            model_limits("claude-opus-4-1-20250805").max_output_tokens,
            32_000
        );
        assert_eq!(
            model_limits("claude-sonnet-4-20250514").context_window,
            200_000
        );
        assert_eq!(model_limits("claude-sonnet-5-5").context_window, 1_000_000);
        assert_eq!(model_limits("gpt-6.2-sol").context_window, 1_050_000);
        assert_eq!(model_limits("gpt-5-mini").context_window, 400_000);
    }

    #[test]
    fn an_unknown_model_gets_the_reference_defaults() {
        assert_eq!(model_limits("llama3.2:3b"), UNKNOWN_MODEL);
        assert_eq!(UNKNOWN_MODEL.context_window, 128_000);
        assert_eq!(UNKNOWN_MODEL.max_output_tokens, 16_384);
    }

    #[test]
    fn reasoning_flags_follow_the_family() {
        assert!(tools_without_reasoning("gpt-6-sol"));
        assert!(tools_without_reasoning("gpt-5.4-mini"));
        assert!(!tools_without_reasoning("gpt-5"));
        assert!(!tools_without_reasoning("gpt-4o"));
        assert!(!tools_without_reasoning("qwen3"));
    }
}
