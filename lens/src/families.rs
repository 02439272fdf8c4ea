//! The consumer families shipped with lens, declared with lens's own macro.
//! `megatron` extends the base presets (it lists `default` / `per_step` as
//! members); `nemo_rl` and `nemo_gym` state theirs completely, equal to the
//! Python library's.

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
    /// NeMo-RL-style post-training (GRPO, PPO, DPO). Presets, as the Python
    /// library's: `default` = job, checkpoint, evaluate; `per_step` = job,
    /// checkpoint, evaluate, step and the eight RL groups; `all` = every base
    /// and RL group.
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
            default: [job, checkpoint, evaluate],
            per_step: [
                job,
                checkpoint,
                evaluate,
                step,
                rollout,
                generation,
                logprob,
                reward,
                advantage,
                policy_update,
                reference_policy,
                data_processing,
            ],
        },
    }
}

crate::define_span_group! {
    /// NeMo-Gym-style RL environment servers. Presets, as the Python
    /// library's: `default` = job, checkpoint, evaluate, server; `per_step` =
    /// job, checkpoint, evaluate, server, rollout_collection, verify,
    /// aggregate_metrics; `all` = every base and Gym group.
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
            default: [job, checkpoint, evaluate, server],
            per_step: [
                job,
                checkpoint,
                evaluate,
                server,
                rollout_collection,
                verify,
                aggregate_metrics,
            ],
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
