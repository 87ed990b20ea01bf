// LR schedulers: the base step/state logic and PyTorch's chainable formulas.
#include "kiln/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>

namespace kiln::optim {

namespace {
// Python's modulo (the result has the divisor's sign).
int64_t py_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer, int64_t last_epoch)
    : optimizer_(optimizer), last_epoch_(last_epoch) {
  KILN_CHECK(last_epoch >= -1, ValueError, "LR scheduler: last_epoch must be >= -1, got ", last_epoch);
  for (size_t i = 0; i < optimizer_.param_groups().size(); ++i) {
    ParamGroup& g = optimizer_.param_groups()[i];
    if (last_epoch == -1) {
      if (!g.has("initial_lr")) g.set("initial_lr", g.lr());
    } else {
      KILN_CHECK(g.has("initial_lr"), ValueError, "param 'initial_lr' is not specified in "
                 "param_groups[", i, "] when resuming a scheduler with last_epoch=", last_epoch);
    }
  }
}

void LRScheduler::initial_step() {
  base_lrs_.clear();
  for (const auto& g : optimizer_.param_groups()) base_lrs_.push_back(g.get("initial_lr"));
  step_count_ = 0;
  step();
}

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> v;
  for (const auto& g : optimizer_.param_groups()) v.push_back(g.lr());
  return v;
}

void LRScheduler::step() {
  step_count_ += 1;
  last_epoch_ += 1;
  std::vector<double> lrs = get_lr();
  auto& groups = optimizer_.param_groups();
  KILN_INTERNAL_ASSERT(lrs.size() == groups.size());
  for (size_t i = 0; i < groups.size(); ++i) groups[i].set("lr", lrs[i]);
  last_lr_ = group_lrs();
}

SchedulerStateDict LRScheduler::state_dict() const {
  return {last_epoch_, step_count_, base_lrs_, last_lr_};
}

void LRScheduler::load_state_dict(const SchedulerStateDict& s) {
  size_t n = optimizer_.param_groups().size();
  KILN_CHECK(s.base_lrs.size() == n && s.last_lr.size() == n, ValueError,
             "LR scheduler: the state dict is for ", s.base_lrs.size(),
             " parameter groups, the optimizer has ", n);
  last_epoch_ = s.last_epoch;
  step_count_ = s.step_count;
  base_lrs_ = s.base_lrs;
  last_lr_ = s.last_lr;
}

StepLR::StepLR(Optimizer& opt, int64_t step_size_, double gamma_, int64_t last_epoch)
    : LRScheduler(opt, last_epoch), step_size(step_size_), gamma(gamma_) {
  KILN_CHECK(step_size > 0, ValueError, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0 || last_epoch_ % step_size != 0) return lrs;
  for (double& lr : lrs) lr *= gamma;
  return lrs;
}

MultiStepLR::MultiStepLR(Optimizer& opt, std::vector<int64_t> ms, double gamma_, int64_t last_epoch)
    : LRScheduler(opt, last_epoch), milestones(std::move(ms)), gamma(gamma_) {
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  auto count = std::count(milestones.begin(), milestones.end(), last_epoch_);
  if (count == 0) return lrs;
  for (double& lr : lrs) lr *= std::pow(gamma, double(count));
  return lrs;
}

ExponentialLR::ExponentialLR(Optimizer& opt, double gamma_, int64_t last_epoch)
    : LRScheduler(opt, last_epoch), gamma(gamma_) {
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) return lrs;
  for (double& lr : lrs) lr *= gamma;
  return lrs;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min_,
                                     int64_t last_epoch)
    : LRScheduler(opt, last_epoch), T_max(t_max), eta_min(eta_min_) {
  KILN_CHECK(T_max > 0, ValueError, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  const double pi = M_PI, e = double(last_epoch_), T = double(T_max);
  if (last_epoch_ == 0) return lrs;
  if (step_count_ == 1 && last_epoch_ > 0) {
    for (size_t i = 0; i < lrs.size(); ++i)
      lrs[i] = eta_min + (base_lrs_[i] - eta_min) * (1 + std::cos(e * pi / T)) / 2;
    return lrs;
  }
  if (py_mod(last_epoch_ - 1 - T_max, 2 * T_max) == 0) {
    for (size_t i = 0; i < lrs.size(); ++i)
      lrs[i] = lrs[i] + (base_lrs_[i] - eta_min) * (1 - std::cos(pi / T)) / 2;
    return lrs;
  }
  for (double& lr : lrs)
    lr = (1 + std::cos(pi * e / T)) / (1 + std::cos(pi * (e - 1) / T)) * (lr - eta_min) + eta_min;
  return lrs;
}

LinearLR::LinearLR(Optimizer& opt, double sf, double ef, int64_t iters, int64_t last_epoch)
    : LRScheduler(opt, last_epoch), start_factor(sf), end_factor(ef), total_iters(iters) {
  KILN_CHECK(start_factor > 0 && start_factor <= 1, ValueError, "LinearLR: starting multiplicative "
             "factor expected to be greater than 0 and less or equal to 1, got ", start_factor);
  KILN_CHECK(end_factor >= 0 && end_factor <= 1, ValueError, "LinearLR: ending multiplicative "
             "factor expected to be between 0 and 1, got ", end_factor);
  KILN_CHECK(total_iters > 0, ValueError, "LinearLR: total_iters must be positive, got ", total_iters);
  initial_step();
}

std::vector<double> LinearLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr *= start_factor;
    return lrs;
  }
  if (last_epoch_ > total_iters) return lrs;
  for (double& lr : lrs)
    lr *= 1.0 + (end_factor - start_factor) /
                    (double(total_iters) * start_factor +
                     double(last_epoch_ - 1) * (end_factor - start_factor));
  return lrs;
}

OneCycleLR::OneCycleLR(Optimizer& opt, double max_lr, int64_t total, const OneCycleOptions& o,
                       int64_t last_epoch)
    : OneCycleLR(opt, std::vector<double>(opt.param_groups().size(), max_lr), total, o,
                 last_epoch) {}

OneCycleLR::OneCycleLR(Optimizer& opt, std::vector<double> max_lr, int64_t total,
                       const OneCycleOptions& o, int64_t last_epoch)
    : LRScheduler(opt, last_epoch), total_steps(total), options(o) {
  KILN_CHECK(total_steps > 0, ValueError, "OneCycleLR: expected a positive total_steps, got ",
             total_steps);
  KILN_CHECK(o.pct_start >= 0 && o.pct_start <= 1, ValueError,
             "OneCycleLR: expected a float between 0 and 1 for pct_start, got ", o.pct_start);
  KILN_CHECK(o.anneal_strategy == "cos" || o.anneal_strategy == "linear", ValueError,
             "OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', got ",
             o.anneal_strategy);
  auto& groups = optimizer_.param_groups();
  KILN_CHECK(max_lr.size() == groups.size(), ValueError, "OneCycleLR: expected ", groups.size(),
             " values for max_lr, got ", max_lr.size());
  double t = double(total_steps);
  if (o.three_phase)
    phases_ = {{o.pct_start * t - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {2 * o.pct_start * t - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"},
               {t - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"}};
  else
    phases_ = {{o.pct_start * t - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {t - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"}};
  if (o.cycle_momentum) {
    const Options& d = optimizer_.defaults();
    momentum_key_ = d.count("beta1") ? "beta1" : d.count("momentum") ? "momentum" : "";
    KILN_CHECK(!momentum_key_.empty(), ValueError, "OneCycleLR: optimizer ", optimizer_.name(),
               " must support momentum or beta1 with `cycle_momentum` option enabled");
  }
  if (last_epoch == -1) {
    for (size_t i = 0; i < groups.size(); ++i) {
      ParamGroup& g = groups[i];
      double initial = max_lr[i] / o.div_factor;
      g.set("initial_lr", initial);
      g.set("max_lr", max_lr[i]);
      g.set("min_lr", initial / o.final_div_factor);
      if (o.cycle_momentum) {
        g.set(momentum_key_, o.max_momentum);
        g.set("max_momentum", o.max_momentum);
        g.set("base_momentum", o.base_momentum);
      }
    }
  }
  initial_step();
}

std::vector<double> OneCycleLR::get_lr() {
  KILN_CHECK(last_epoch_ <= total_steps, ValueError, "OneCycleLR: tried to step ", last_epoch_,
             " times. The specified number of total steps is ", total_steps);
  auto anneal = [&](double start, double end, double pct) {
    if (options.anneal_strategy == "linear") return (end - start) * pct + start;
    double cos_out = std::cos(M_PI * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  };
  std::vector<double> lrs;
  const double step = double(last_epoch_);
  for (ParamGroup& g : optimizer_.param_groups()) {
    double start_step = 0, lr = 0, momentum = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& ph = phases_[i];
      if (step <= ph.end_step || i + 1 == phases_.size()) {
        double pct = (step - start_step) / (ph.end_step - start_step);
        lr = anneal(g.get(ph.start_lr), g.get(ph.end_lr), pct);
        if (options.cycle_momentum)
          momentum = anneal(g.get(ph.start_momentum), g.get(ph.end_momentum), pct);
        break;
      }
      start_step = ph.end_step;
    }
    lrs.push_back(lr);
    if (options.cycle_momentum) g.set(momentum_key_, momentum);
  }
  return lrs;
}

}  // namespace kiln::optim
