#pragma once
// Learning-rate schedulers, as torch.optim.lr_scheduler. Each sets the "lr" of every group
// of its optimizer; construction performs the first step (epoch 0), and step() is called
// once per epoch (or per batch for OneCycleLR) after optimizer.step(). The formulas are
// PyTorch's recursive ("chainable") forms, so the learning rates match PyTorch's.
//
// Resuming: build the optimizer and the scheduler as before (same arguments), then load the
// optimizer's state dict (it holds the groups' current "lr") and the scheduler's.
#include <string>
#include <vector>

#include "kiln/optim/optimizer.h"

namespace kiln::optim {

struct SchedulerStateDict {
  int64_t last_epoch = -1;
  int64_t step_count = 0;
  std::vector<double> base_lrs;
  std::vector<double> last_lr;
};

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  void step();
  // The learning rates the last step set, one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  SchedulerStateDict state_dict() const;
  void load_state_dict(const SchedulerStateDict& state);

 protected:
  // last_epoch = -1 starts a schedule (each group's "initial_lr" is set to its "lr" where
  // absent); otherwise the groups must already have "initial_lr" (as in PyTorch).
  LRScheduler(Optimizer& optimizer, int64_t last_epoch);
  // Derived constructors call this last: the step to epoch last_epoch + 1.
  void initial_step();
  // The new learning rate of every group for epoch last_epoch_.
  virtual std::vector<double> get_lr() = 0;
  std::vector<double> group_lrs() const;

  Optimizer& optimizer_;
  int64_t last_epoch_;
  int64_t step_count_ = 0;
  std::vector<double> base_lrs_, last_lr_;
};

// lr *= gamma every step_size epochs.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1, int64_t last_epoch = -1);
  const int64_t step_size;
  const double gamma;

 protected:
  std::vector<double> get_lr() override;
};

// lr *= gamma at each milestone (a milestone listed twice multiplies by gamma^2).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1,
              int64_t last_epoch = -1);
  const std::vector<int64_t> milestones;
  const double gamma;

 protected:
  std::vector<double> get_lr() override;
};

// lr *= gamma every epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma, int64_t last_epoch = -1);
  const double gamma;

 protected:
  std::vector<double> get_lr() override;
};

// eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, continued periodically
// past T_max as PyTorch's recursive form does.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0,
                    int64_t last_epoch = -1);
  const int64_t T_max;
  const double eta_min;

 protected:
  std::vector<double> get_lr() override;
};

// Linear warmup: the factor goes from start_factor to end_factor over total_iters epochs.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5, int64_t last_epoch = -1);
  const double start_factor, end_factor;
  const int64_t total_iters;

 protected:
  std::vector<double> get_lr() override;
};

struct OneCycleOptions {
  double pct_start = 0.3;
  std::string anneal_strategy = "cos";  // or "linear"
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25;
  double final_div_factor = 1e4;
  bool three_phase = false;
};

// The 1cycle policy, stepped once per batch for total_steps steps: lr rises from
// max_lr / div_factor to max_lr over pct_start of the steps, then anneals to
// initial_lr / final_div_factor (three_phase: back to initial_lr first). With
// cycle_momentum the groups' "momentum" (SGD, RMSprop) or "beta1" (Adam) cycles inversely
// between max_momentum and base_momentum.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lr, int64_t total_steps,
             const OneCycleOptions& options = {}, int64_t last_epoch = -1);
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps,
             const OneCycleOptions& options = {}, int64_t last_epoch = -1);
  const int64_t total_steps;
  const OneCycleOptions options;

 protected:
  std::vector<double> get_lr() override;

 private:
  struct Phase {
    double end_step;
    const char *start_lr, *end_lr, *start_momentum, *end_momentum;
  };
  std::vector<Phase> phases_;
  std::string momentum_key_;  // "momentum" or "beta1" (empty without cycle_momentum)
};

}  // namespace kiln::optim
