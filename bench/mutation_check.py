"""How much the test suite catches: plant one plausible bug at a time in a scratch copy of the
repository, run the tests that should catch it, and report caught / missed.

    python bench/mutation_check.py            # every mutation (~35 min on 2 cores)
    python bench/mutation_check.py --list     # the mutations, without running anything
    python bench/mutation_check.py gp_at_reals r1_on_fakes

Each mutation is a list of exact (file, old, new) replacements (each `old` must occur exactly once,
so a refactor that moves the code makes this script fail loudly instead of testing nothing) and the
test files that should catch it. A mutation is caught when those tests fail. The working tree is
never touched: every mutation runs in its own copy under a temp dir. Latest results: bench/RESULTS.md.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: ([(file, old, new), ...], [test paths], what the bug is)
MUTATIONS = {
    "train_mode_off": (
        [("loops/learner.py", "        self.net = declare(name, net, train=True, amp=amp)",
          "        self.net = declare(name, net, train=False, amp=amp)")],
        ["tests/test_train_mode.py"], "G and D train in eval mode (BatchNorm frozen, spectral norm's u fixed)"),
    "sn_u_frozen": (
        [("models/spectral_norm.py", "sigma = ops.depend(sigma, ops.assign(self.u, u))", "sigma = sigma")],
        ["tests/test_spectral_norm.py", "tests/test_train_mode.py"], "spectral norm never advances u"),
    "gp_at_reals": (
        [("gan/steps.py", "x_hat = a * real + (1.0 - a) * fake", "x_hat = real")],
        ["tests/test_penalties.py"], "GP evaluated at the real samples, not the interpolates"),
    "r1_on_fakes": (
        [("gan/steps.py", "r1_penalty(input_grad(real, y_real, aug_real), r1, pack_size)",
          "r1_penalty(input_grad(fake, y_fake, aug_fake), r1, pack_size)")],
        ["tests/test_penalties.py"], "R1 evaluated on fakes"),
    "pack_norm_per_sample": (
        [("gan/penalties.py", "grad.reshape(grad.shape[0] // pack_size, -1)", "grad.reshape(grad.shape[0], -1)")],
        ["tests/test_penalties.py"], "PacGAN penalties measured per unpacked sample"),
    "pynative_second_order": (
        [("gan/penalties.py", "return grad if jit_enabled() else ms.jit(grad)", "return grad")],
        ["tests/test_penalties.py"], "PyNative penalties lose their gradient through view ops"),
    "swap_real_fake_logits": (
        [("gan/steps.py", "loss_d = d_loss_fn(real_logits, fake_logits)", "loss_d = d_loss_fn(fake_logits, real_logits)")],
        ["tests/test_penalties.py", "tests/test_gan_losses.py"], "D's loss with real and fake logits swapped"),
    "diffaug_off_in_d": (
        [("gan/steps.py", "        if augment_policies:\n            x = augment.apply(x, aug, augment_policies)\n        return discriminator(",
          "        return discriminator(")],
        ["tests/test_augment.py"], "DiffAugment not applied inside D's main step"),
    "lazy_r1_skips_diffaug": (
        [("gan/steps.py", "    d_of = discriminate(discriminator, pack_size, augment_policies)\n\n    def d_sum(x, y, aug):\n        return ops.sum(d_of(x, y, aug))\n\n    input_grad = input_gradient(d_sum)\n\n    def r1_forward",
          "    d_of = discriminate(discriminator, pack_size, ())\n\n    def d_sum(x, y, aug):\n        return ops.sum(d_of(x, y, aug))\n\n    input_grad = input_gradient(d_sum)\n\n    def r1_forward")],
        ["tests/test_penalties.py"], "lazy R1 computed on un-augmented reals"),
    "lazy_r1_unscaled": (
        [("gan/steps.py", "return every * r1_penalty(", "return r1_penalty(")],
        ["tests/test_penalties.py"], "lazy R1 without its x every scaling"),
    "lazy_r1_no_adjustment": (
        [("gan/trainer.py", "c = cfg.r1_every / (cfg.r1_every + 1)", "c = 1.0")],
        ["tests/test_penalties.py"], "lazy R1 without StyleGAN2's lr / beta adjustment"),
    "lr_assigned_after_update": (
        [("loops/step.py", "            grads = ops.depend(grads, ops.assign(lr_param, lr))", "            pass"),
         ("loops/step.py", "            loss = ops.depend(loss, optimizer(grads))\n            if constraint is not None:  #",
          "            loss = ops.depend(loss, optimizer(grads))\n            if takes_lr:\n"
          "                loss = ops.depend(loss, ops.assign(lr_param, lr))\n            if constraint is not None:  #")],
        ["tests/test_step.py"], "the scheduled rate is assigned after the update"),
    "multistep_logs_sums": (
        [("loops/driver.py", "np.full(len(p.tags), 1.0 / max(1, n * p.repeat), np.float32)",
          "np.full(len(p.tags), 1.0, np.float32)")],
        ["tests/test_gan_steps.py"], "multi-step logs sums instead of means"),
    "amp_grad_norm_scaled": (
        [("loops/step.py", "            norm_before = scaler.unscale(norm_before)", "            norm_before = norm_before")],
        ["tests/test_step.py"], "an --amp grad norm left x65536"),
    "loss_scale_not_checkpointed": (
        [("loops/transforms.py", "self.extra_parameters = list(self.state)",
          "self.extra_parameters = []")],
        ["tests/test_train_gan.py::test_gan_resume_is_bit_identical", "tests/test_transforms.py"],
        "the loss-scaler state missing from checkpoints"),
    "no_checkpoint_crc": (
        [("loops/checkpoint.py", "ms.load_checkpoint(path, crc_check=True)", "ms.load_checkpoint(path)")],
        ["tests/test_regression.py"], "checkpoints loaded without verifying their checksum"),
    "ema_off_stale": (
        [("gan/trainer.py", "        self.refresh_ema()  # --ema 0: the checkpoint's", "        pass  # --ema 0: the checkpoint's")],
        ["tests/test_train_gan.py::test_ema_off_checkpoints_hold_the_current_generator_as_g_ema"],
        "--ema 0 saves a stale g_ema"),
    "nearest_resize": (
        [("metrics/inception.py", 'mode="bilinear", align_corners=False', 'mode="nearest"')],
        ["tests/test_inception_fid.py"], "Inception preprocessing resizes nearest-neighbour"),
    "translation_rounding": (
        [("gan/augment.py", "dy, dx = int(h * ratio + 0.5), int(w * ratio + 0.5)", "dy, dx = int(h * ratio), int(w * ratio)")],
        ["tests/test_augment.py"], "DiffAugment translation rounds the shift down"),
    "weight_clip_ignored": (
        [("gan/steps.py", "    return ClipWeights(optimizer.parameters, weight_clip) if weight_clip > 0 else None",
          "    return None")],
        ["tests/test_penalties.py"], "WGAN weight clipping never applied"),
    "modes_pacgan_wrong": (
        [("metrics/toy.py", '"modes_pacgan": int((counts >= 1).sum())', '"modes_pacgan": int(covered.sum())')],
        ["tests/test_metrics.py"], "PacGAN's mode count equal to ours"),
    # ---- rl/: what each model learns from (tests/test_rl_dataflow.py and the numpy loss tests) ----
    "ppo_rollout_next_obs": (
        [("rl/ppo.py", "buf.obs[t], buf.actions[t], buf.logprobs[t], buf.values[t] = self.obs, action, logp, value",
          "buf.obs[t], buf.actions[t], buf.logprobs[t], buf.values[t] = obs, action, logp, value")],
        ["tests/test_rl_dataflow.py"], "PPO stores s_{t+1} beside a_t"),
    "gae_gamma_lambda_swapped": (
        [("rl/ppo.py", "next_value, cfg.gamma, cfg.gae_lambda)", "next_value, cfg.gae_lambda, cfg.gamma)")],
        ["tests/test_rl_dataflow.py"], "GAE called with gamma and lambda swapped"),
    "ppo_actor_on_returns": (
        [("rl/ppo.py", "self.buffer.logprobs, self.advantages)", "self.buffer.logprobs, self.returns)")],
        ["tests/test_rl_dataflow.py"], "the actor trained on returns instead of advantages"),
    "ppo_advantages_unnormalised": (
        [("rl/ppo.py", "adv = ((adv - adv.mean()) / (adv.std() + 1e-8)).astype(np.float32)", "adv = adv.astype(np.float32)")],
        ["tests/test_rl_dataflow.py"], "no per-minibatch advantage normalisation"),
    "ppo_truncation_not_bootstrapped": (
        [("rl/ppo.py", "if cut.any():", "if False:")],
        ["tests/test_rl_dataflow.py"], "PPO treats a time limit as a terminal state"),
    "ppo_truncation_not_an_end": (
        [("rl/ppo.py", "buf.rewards[t], buf.dones[t] = reward, (terminated | truncated)",
          "buf.rewards[t], buf.dones[t] = reward, terminated")],
        ["tests/test_rl_dataflow.py"], "GAE runs on across a time limit into the next episode"),
    "ppo_gaussian_logp_no_log_std": (
        [("rl/ppo.py", "logp = ops.sum(-0.5 * z * z - log_std - LOG_SQRT_2PI, -1)", "logp = ops.sum(-0.5 * z * z - LOG_SQRT_2PI, -1)")],
        ["tests/test_rl_dataflow.py"], "continuous PPO's log-probability without its -log std"),
    "ppo_entropy_bonus_sign": (
        [("rl/ppo.py", "- ent_coef * ops.mean(entropy)", "+ ent_coef * ops.mean(entropy)")],
        ["tests/test_rl_dataflow.py"], "--ent-coef penalises entropy instead of rewarding it"),
    "ppo_surrogate_max": (
        [("rl/ppo.py", "surrogate = ops.minimum(ratio * advantages", "surrogate = ops.maximum(ratio * advantages")],
        ["tests/test_rl.py::test_clipped_objective_matches_numpy"], "the clipped surrogate takes the max (an optimistic bound)"),
    "sac_truncation_terminal": (
        [("rl/agent.py", "terminated=terminated.astype(np.float32))", "terminated=(terminated | truncated).astype(np.float32))")],
        ["tests/test_rl_dataflow.py"], "off-policy agents store a time limit as terminal"),
    "sac_next_obs_is_reset": (
        [("rl/agent.py", 'next_obs[i] = info["final_obs"][i]', "pass")],
        ["tests/test_rl_dataflow.py"], "next_obs at an episode's end is the next episode's first observation"),
    "sac_online_critic_as_target": (
        [("rl/sac.py", "t1, t2 = target(next_obs, next_action)", "t1, t2 = critic(next_obs, next_action)")],
        ["tests/test_rl.py::test_sac_losses_match_numpy"], "SAC's TD target from the online critics"),
    "sac_no_terminal_mask": (
        [("rl/sac.py", "(1.0 - terminated) * gamma * soft_value", "gamma * soft_value")],
        ["tests/test_rl.py::test_sac_losses_match_numpy"], "SAC bootstraps through terminal states"),
    "sac_target_entropy_sign": (
        [("rl/sac.py", "self.target_entropy = -float(act_dim)", "self.target_entropy = float(act_dim)")],
        ["tests/test_rl.py::test_sac_losses_match_numpy"], "target entropy +dim(A)"),
    "sac_polyak_inverted": (
        [("rl/sac.py", "EMA(self.critic.net, self.target, 1.0 - cfg.tau)", "EMA(self.critic.net, self.target, cfg.tau)")],
        ["tests/test_rl.py::test_sac_updates_touch_only_their_own_model_and_polyak_moves_the_targets"],
        "targets move by 1 - tau instead of tau"),
    "replay_size_is_cursor": (
        [("rl/replay.py", "self.size = min(self.capacity, self.size + n)", "self.size = self.pos")],
        ["tests/test_rl_dataflow.py"], "the replay buffer's size read from its cursor (shrinks when it wraps)"),
    "replay_newest_row_never_drawn": (
        [("rl/replay.py", "rng.integers(0, self.size, batch_size)", "rng.integers(0, self.size - 1, batch_size)")],
        ["tests/test_rl_dataflow.py"], "the replay buffer never samples its last row"),
    "td3_smoothing_unclipped": (
        [("rl/td3.py", "smoothing = ops.clip_by_value(noise * policy_noise, -noise_clip, noise_clip) * scale",
          "smoothing = noise * policy_noise * scale")],
        ["tests/test_td3_ddpg.py::test_td3_critic_and_actor_losses_match_numpy"], "TD3's smoothing noise not clipped"),
    "dqn_double_picks_with_target": (
        [("rl/dqn.py", "best = ops.argmax(q(next_obs), -1)", "best = ops.argmax(next_q, -1)")],
        ["tests/test_dqn.py::test_td_loss_and_its_gradient_match_numpy"], "Double DQN's argmax taken by the target network"),
    # bugs that break learning outright: the slow learning tests alone must catch them
    "ppo_advantage_sign": (
        [("rl/ppo.py", "inputs = (obs, actions, logprobs, adv)", "inputs = (obs, actions, logprobs, -adv)")],
        ["tests/test_rl.py::test_ppo_learns_cartpole_far_above_a_random_policy"], "PPO ascends the wrong way"),
    "clip_norm_shared_by_members": (
        [("loops/transforms.py", "        if self.members == 1:", "        if True:")],
        ["tests/test_transforms.py", "tests/test_ppo_seeds.py"], "--num-seeds clips all seeds by one shared norm"),
    "native_gae_crosses_episodes": (
        [("rl/ppo_native.py", "    ended_before = ops.cumsum(dones, 0) - dones", "    ended_before = ops.cumsum(dones, 0)")],
        ["tests/test_ppo_native.py"], "the in-graph GAE counts a step's own done as before it"),
    "sac_actor_minimises_q": (
        [("rl/sac.py", "return ops.mean(alpha() * logp - ops.minimum(q1, q2)), -ops.mean(logp)",
          "return ops.mean(alpha() * logp + ops.minimum(q1, q2)), -ops.mean(logp)")],
        ["tests/test_rl.py::test_sac_learns_pendulum_far_above_a_random_policy"], "SAC's actor minimises Q"),
    # ---- models/ and the flag cache ----
    "dcgan_no_tanh": (
        [("models/dcgan.py", "            nn.Tanh(),\n        ])", "        ])")],
        ["tests/test_model_matrix.py::test_image_generators_end_in_the_image_range"], "DCGAN's generator without its tanh output"),
    "projection_term_dropped": (
        [("models/mlp.py", "            out = out + (self.embed(y) * h).sum(-1)", "            out = out")],
        ["tests/test_model_matrix.py", "tests/test_train_gan.py"], "the projection discriminator ignores the label"),
    "generator_ignores_label": (
        [("models/mlp.py", "            z = z * self.embed(y)\n        return self.net(z)", "            pass\n        return self.net(z)")],
        ["tests/test_model_matrix.py", "tests/test_train_gan.py"], "the conditional toy generator ignores the label"),
    "resnet_block_no_residual": (
        [("models/translate.py", "        return x + self.conv_block(x)", "        return self.conv_block(x)")],
        ["tests/test_translate_models.py::test_resnet_and_unet_blocks_keep_their_skip_connections"],
        "CycleGAN's ResNet block without its skip"),
    "unet_skip_dropped": (
        [("models/translate.py", "        return ops.cat((x, self.model(x)), 1)", "        return ops.cat((self.model(x), self.model(x)), 1)")],
        ["tests/test_translate_models.py::test_resnet_and_unet_blocks_keep_their_skip_connections"],
        "pix2pix's U-Net passes no skip (the branch twice: same shapes and counts)"),
    "flagcache_scripts_unhashed": (
        [("loops/flagcache.py", 'files = [os.path.join(ROOT, n) for n in os.listdir(ROOT) if n.endswith(".py")]', "files = []")],
        ["tests/test_flagcache.py"], "an edited entry script keeps its stale flags"),
    "flagcache_python_unhashed": (
        [("loops/flagcache.py", "digest = hashlib.sha256(sys.version.encode())", "digest = hashlib.sha256()")],
        ["tests/test_flagcache.py"], "another Python reads this one's kept flags"),
    "flagcache_variant_ignored": (
        [("loops/flagcache.py", '(f"-{variant}" if variant else "")', '""')],
        ["tests/test_flagcache.py"], "every recipe of a script shares one flag file"),
}


def scratch_copy(dest):
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if os.path.isfile(os.path.join(ROOT, f)):
            os.makedirs(os.path.dirname(os.path.join(dest, f)) or dest, exist_ok=True)
            shutil.copy2(os.path.join(ROOT, f), os.path.join(dest, f))


def apply(dest, edits):
    for path, old, new in edits:
        full = os.path.join(dest, path)
        text = open(full).read()
        if text.count(old) != 1:
            raise SystemExit(f"error: mutation target not found exactly once in {path}: {old[:60]!r}")
        with open(full, "w") as f:
            f.write(text.replace(old, new))


def run(name):
    edits, tests, _ = MUTATIONS[name]
    with tempfile.TemporaryDirectory(prefix=f"mut_{name}_") as dest:
        scratch_copy(dest)
        apply(dest, edits)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                              cwd=dest, capture_output=True, text=True)
        took = time.perf_counter() - start
    summary = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    return proc.returncode != 0, took, summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="mutations to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = parser.parse_args()
    if args.list:
        for name, (_, tests, what) in MUTATIONS.items():
            print(f"{name:30s} {what}  [{' '.join(tests)}]")
        return 0
    unknown = [n for n in args.names if n not in MUTATIONS]
    if unknown:
        print(f"error: unknown mutation {unknown[0]!r} (see --list)", file=sys.stderr)
        return 2
    caught = 0
    names = args.names or list(MUTATIONS)
    print("| mutation | caught | seconds | last pytest line |\n|---|---|---|---|")
    for name in names:
        ok, took, summary = run(name)
        caught += ok
        print(f"| {name} | {'yes' if ok else '**NO**'} | {took:.0f} | {summary} |", flush=True)
    print(f"\ncaught {caught} of {len(names)}")
    return 0 if caught == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
