//! The consumer families shipped with lens, declared with lens's own macro.

crate::define_span_group! {
    /// Megatron-style pretraining. Presets: `default` = job, checkpoint,
    /// evaluate, inference; `per_step` = every base group + communication,
    /// data_loading, inference; `all` = everything.
    pub megatron {
        groups: [
            /// One microbatch of a step.
            microbatch,
            /// One transformer layer (very fine-grained).
            layer,
            /// Collectives and point-to-point communication.
            communication,
            /// Activation offloading.
            activation_offload,
            /// Fetching and preparing a batch.
            data_loading,
            /// Inference / generation inside the training job.
            inference,
        ],
        presets: {
            default: [default, inference],
            per_step: [per_step, communication, data_loading, inference],
        },
    }
}

crate::define_span_group! {
    /// NeMo-RL-style post-training (GRPO, PPO, DPO). Presets: `default` =
    /// job, checkpoint, evaluate, rollout, policy_update (one span per phase
    /// of an RL iteration); `per_step` = every base group + rollout,
    /// generation, reward, advantage, policy_update; `all` = everything
    /// (adds per-batch logprob, reference_policy and data_processing).
    pub nemo_rl {
        groups: [
            /// Collecting a batch of rollouts.
            rollout,
            /// Generation by the policy (inference engine).
            generation,
            /// Log-probability computation.
            logprob,
            /// Reward computation.
            reward,
            /// Advantage estimation.
            advantage,
            /// Policy update (training) phase.
            policy_update,
            /// Reference-policy forward passes.
            reference_policy,
            /// Data processing between phases.
            data_processing,
        ],
        presets: {
            default: [default, rollout, policy_update],
            per_step: [per_step, default, generation, reward, advantage],
        },
    }
}

crate::define_span_group! {
    /// NeMo-Gym-style RL environment servers. Presets: `default` = job,
    /// checkpoint, evaluate, server, rollout_collection (request-level
    /// spans); `per_step` = every base group + server, rollout_collection,
    /// verify; `all` = everything (adds aggregate_metrics).
    pub nemo_gym {
        groups: [
            /// One server request.
            server,
            /// Collecting rollouts from environments.
            rollout_collection,
            /// Verifying a response.
            verify,
            /// Aggregating metrics.
            aggregate_metrics,
        ],
        presets: {
            default: [default, server, rollout_collection],
            per_step: [per_step, default, verify],
        },
    }
}

crate::define_span_group! {
    /// Inference servers: the phases of one generation request. Presets:
    /// `default` = job, checkpoint, evaluate, request (one span per
    /// request); `per_step` = every base group + request, prefill, decode;
    /// `all` = everything (adds a span per sampled token).
    pub inference_server {
        groups: [
            /// One generation request, arrival to last token.
            request,
            /// The prompt's forward pass (up to the first token).
            prefill,
            /// The decode loop (after the first token).
            decode,
            /// Sampling one token (very fine-grained).
            sample,
        ],
        presets: {
            default: [default, request],
            per_step: [per_step, default, prefill, decode],
        },
    }
}
