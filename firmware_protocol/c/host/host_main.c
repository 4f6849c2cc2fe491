/* The firmware core served on a pseudo-terminal, with a simulated servo per joint: the C twin of
 * `python -m firmware_protocol.emulator`, with the same options and fault injection.
 *
 *   hil-board-host --kind humanoid17|puma6 [--config JSON] [--offsets-deg a,b,..] [--reverse i,j]
 *                  [--fault SPEC]... [--uid HEX24] [--link PATH] [--baud B] [--latency-ms MS]
 *                  [--noise-deg D] [--seed N] [--duration S] [--watchdog-ms MS] [--parent-pid PID]
 *
 * One fault of its own besides the Python emulator's: clocklag:US, every read of the board's clock
 * late by up to US microseconds at random (a microcontroller's clock read racing its tick
 * interrupt reads early; the core's ages must hold when a later read is the smaller).
 *
 * Prints the pty path on stdout, then serves until SIGTERM/SIGINT. Floating point is used here,
 * in the simulated servos only: the core itself has none.
 */
#define HIL_WANT_KIND_MODELS   /* the generated table of board kinds (defaults) */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../hal.h"
#include "../hil_fw.h"

#define MAXJ HIL_MAX_JOINTS
#define QUEUE 64
#define MAX_WINDOWS 16

/* ------------------------------------------------------------------ options and faults */
struct window { double at, dur; };
static struct {
  int kind, n;
  double lower[MAXJ], upper[MAXJ], initial[MAXJ], vmax[MAXJ], offset[MAXJ], sign[MAXJ];
  double tau, noise, resolution, max_step;
  uint16_t supply_mv;
  uint8_t uid[12];
  double baud, latency, duration;
  int watchdog_ms, parent;
  const char *link;
  unsigned seed;
  double drop, corrupt, garbage, delay, clock_lag_us;
  struct window stalls[MAX_WINDOWS], mutes[MAX_WINDOWS];
  int n_stalls, n_mutes;
  double mute_usr1, stall_usr1, disconnect_at, reboots[MAX_WINDOWS], bad_states[MAX_WINDOWS];
  int n_reboots, n_bad;
} opt;

static void die(const char *fmt, const char *arg) {
  fprintf(stderr, "emulator: ");
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  exit(2);
}

static int parse_list(const char *text, double *out, int cap) {
  int n = 0;
  const char *p = text;
  while (*p) {
    while (*p == ',' || *p == ' ') p++;
    if (!*p) break;
    char *end;
    double v = strtod(p, &end);
    if (end == p || !isfinite(v)) die("not a number list: %s", text);
    if (n == cap) die("too many values: %s", text);
    out[n++] = v;
    p = end;
  }
  return n;
}

static double number(const char *text, const char *what) {
  char *end;
  double v = strtod(text, &end);
  if (end == text || *end || !isfinite(v) || v < 0) die(what, text);
  return v;
}

static void json_list(const char *json, const char *key, double *out, int n, double scale) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\"", key);
  const char *p = strstr(json, pat);
  if (!p) return;
  p = strchr(p + strlen(pat), '[');
  if (!p) die("--config: %s is not a list", key);
  double vals[MAXJ + 1];
  char buf[4096];
  const char *end = strchr(p, ']');
  if (!end || (size_t)(end - p) >= sizeof buf) die("--config: %s is not a list", key);
  memcpy(buf, p + 1, (size_t)(end - p - 1));
  buf[end - p - 1] = 0;
  if (parse_list(buf, vals, MAXJ + 1) != n) die("config %s needs one value per joint", key);
  for (int j = 0; j < n; j++) out[j] = vals[j] * scale;
}

static void parse_fault(const char *spec) {
  const char *colon = strchr(spec, ':'), *at = strchr(spec, '@');
  if (!strncmp(spec, "drop:", 5)) opt.drop = number(spec + 5, "bad --fault %s (drop:P)");
  else if (!strncmp(spec, "corrupt:", 8)) opt.corrupt = number(spec + 8, "bad --fault %s (corrupt:P)");
  else if (!strncmp(spec, "garbage:", 8)) opt.garbage = number(spec + 8, "bad --fault %s (garbage:P)");
  else if (!strncmp(spec, "delay:", 6)) opt.delay = number(spec + 6, "bad --fault %s (delay:MS)") / 1000.0;
  else if ((!strncmp(spec, "stall:", 6) || !strncmp(spec, "mute:", 5)) && at && colon && colon < at) {
    char dur[32];
    size_t k = (size_t)(at - colon - 1);
    if (k >= sizeof dur) die("bad --fault %s", spec);
    memcpy(dur, colon + 1, k);
    dur[k] = 0;
    double d = number(dur, "bad --fault duration %s");
    int stall = spec[0] == 's';
    if (!strcmp(at + 1, "usr1")) {
      if (stall) opt.stall_usr1 = d; else opt.mute_usr1 = d;
    } else {
      struct window *w = stall ? &opt.stalls[opt.n_stalls++] : &opt.mutes[opt.n_mutes++];
      if (opt.n_stalls > MAX_WINDOWS || opt.n_mutes > MAX_WINDOWS) die("too many --fault %s", spec);
      w->at = number(at + 1, "bad --fault time %s");
      w->dur = d;
    }
  } else if (!strncmp(spec, "disconnect@", 11)) opt.disconnect_at = number(spec + 11, "bad --fault %s");
  else if (!strncmp(spec, "reboot@", 7) && opt.n_reboots < MAX_WINDOWS)
    opt.reboots[opt.n_reboots++] = number(spec + 7, "bad --fault %s");
  else if (!strncmp(spec, "badstate@", 9) && opt.n_bad < MAX_WINDOWS)
    opt.bad_states[opt.n_bad++] = number(spec + 9, "bad --fault %s");
  else if (!strncmp(spec, "clocklag:", 9)) opt.clock_lag_us = number(spec + 9, "bad --fault %s (clocklag:US)");
  else die("bad --fault %s; expected drop:P, corrupt:P, garbage:P, delay:MS, stall:S@T, disconnect@T, reboot@T, "
           "mute:S@T, badstate@T or clocklag:US", spec);
  if (opt.drop > 1 || opt.corrupt > 1 || opt.garbage > 1) die("bad --fault %s (probability must be in [0, 1])", spec);
}

/* the kind's row of the generated table (firmware_protocol/board_kinds.py); a kind sized by its
 * robot's config (servos) is the Python emulator's */
static const struct hil_kind_model *model;

static void defaults(const char *kind) {
  for (int k = 0; k < HIL_N_KINDS && !model; k++)
    if (!strcmp(kind, HIL_KIND_MODELS[k].name) && HIL_KIND_MODELS[k].n_joints) model = &HIL_KIND_MODELS[k];
  if (!model) die("--kind %s: the host build's kinds are those of a fixed joint count (humanoid17, puma6)", kind);
  opt.kind = model->kind; opt.n = model->n_joints; opt.tau = model->tau_s; opt.noise = model->noise_rad;
  opt.resolution = model->resolution_rad; opt.supply_mv = (uint16_t)model->supply_mv;
  opt.max_step = model->max_step_rad;
  for (int j = 0; j < model->n_vmax && j < MAXJ; j++) opt.vmax[j] = model->vmax_rad_s[j];
  for (int j = 0; j < opt.n; j++) {
    opt.lower[j] = -M_PI; opt.upper[j] = M_PI; opt.sign[j] = 1.0;
  }
}

static void parse_args(int argc, char **argv) {
  const char *kind = "puma6", *config = NULL, *offsets = NULL, *reverse = NULL, *uid = NULL;
  double noise_deg = -1;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--kind") && i + 1 < argc) kind = argv[i + 1];
  defaults(kind);
  opt.baud = 1e6;
  opt.disconnect_at = -1;
  opt.seed = (unsigned)time(NULL) ^ (unsigned)getpid();
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) die("%s needs a value", a);
    i++;
    if (!strcmp(a, "--kind")) continue;
    else if (!strcmp(a, "--config")) config = v;
    else if (!strcmp(a, "--offsets-deg")) offsets = v;
    else if (!strcmp(a, "--reverse")) reverse = v;
    else if (!strcmp(a, "--fault")) { char buf[256]; snprintf(buf, sizeof buf, "%s", v);
      for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) parse_fault(t); }
    else if (!strcmp(a, "--uid")) uid = v;
    else if (!strcmp(a, "--link")) opt.link = v;
    else if (!strcmp(a, "--baud")) opt.baud = number(v, "--baud %s");
    else if (!strcmp(a, "--latency-ms")) opt.latency = number(v, "--latency-ms %s") / 1000.0;
    else if (!strcmp(a, "--noise-deg")) noise_deg = number(v, "--noise-deg %s");
    else if (!strcmp(a, "--seed")) opt.seed = (unsigned)number(v, "--seed %s");
    else if (!strcmp(a, "--duration")) opt.duration = number(v, "--duration %s");
    else if (!strcmp(a, "--watchdog-ms")) opt.watchdog_ms = (int)number(v, "--watchdog-ms %s");
    else if (!strcmp(a, "--parent-pid")) opt.parent = (int)number(v, "--parent-pid %s");
    else die("unknown option %s", a);
  }
  if (config) {
    json_list(config, "lower_deg", opt.lower, opt.n, M_PI / 180);
    json_list(config, "upper_deg", opt.upper, opt.n, M_PI / 180);
    json_list(config, "initial_deg", opt.initial, opt.n, M_PI / 180);
    json_list(config, "vmax_deg_s", opt.vmax, opt.n, M_PI / 180);
  }
  if (offsets) {
    double v[MAXJ + 1];
    if (parse_list(offsets, v, MAXJ + 1) != opt.n) die("--offsets-deg needs one value per joint (%s)", offsets);
    for (int j = 0; j < opt.n; j++) opt.offset[j] = v[j] * M_PI / 180;
  }
  if (reverse) {
    double v[MAXJ + 1];
    int k = parse_list(reverse, v, MAXJ + 1);
    for (int i = 0; i < k; i++) {
      if (v[i] < 0 || v[i] >= opt.n || v[i] != floor(v[i])) die("--reverse joint %s out of range", reverse);
      opt.sign[(int)v[i]] = -1.0;
    }
  }
  if (uid) {
    if (strlen(uid) != 24) die("--uid %s: 24 hex digits", uid);
    for (int k = 0; k < 12; k++) {
      unsigned x;
      if (sscanf(uid + 2 * k, "%2x", &x) != 1) die("--uid %s: 24 hex digits", uid);
      opt.uid[k] = (uint8_t)x;
    }
  } else {
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(opt.uid, 1, 12, f) != 12) die("cannot read %s", "/dev/urandom");
    fclose(f);
  }
  if (noise_deg >= 0) opt.noise = noise_deg * M_PI / 180;
  if (opt.watchdog_ms && (opt.watchdog_ms < 10 || opt.watchdog_ms > 1000)) die("--watchdog-ms %s is outside 10 … 1000", "");
}

/* ------------------------------------------------------------------ the simulated servos (the HAL) */
static struct hil_board board;
static double q[MAXJ], qd[MAXJ], target_b[MAXJ];
static int enabled;
static double t_boot;                    /* monotonic seconds at the (simulated) power-on */

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double gauss(void) {
  double u = (rand() + 1.0) / ((double)RAND_MAX + 2.0), v = (rand() + 1.0) / ((double)RAND_MAX + 2.0);
  return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

uint64_t hal_micros(void) {
  double t = mono() - t_boot;
  if (opt.clock_lag_us > 0) t -= opt.clock_lag_us * 1e-6 * rand() / ((double)RAND_MAX + 1.0);
  return t > 0 ? (uint64_t)llround(t * 1e6) : 0;
}
/* the host build simulates no IMU (the physics emulator, hil emulate --physics, has one) */
int hal_read_imu(int16_t quat[4], int16_t gyro_mrad_s[3], int16_t acc_mm_s2[3]) {
  (void)quat; (void)gyro_mrad_s; (void)acc_mm_s2;
  return 0;
}
uint16_t hal_supply_mv(void) { return opt.supply_mv; }
void hal_unique_id(uint8_t uid[12]) { memcpy(uid, opt.uid, 12); }
uint32_t hal_random32(void) {
  uint32_t r;
  FILE *f = fopen("/dev/urandom", "rb");
  if (!f || fread(&r, 4, 1, f) != 1) r = (uint32_t)rand();
  if (f) fclose(f);
  return r;
}
static int32_t urad(double v) {
  double x = llround(v * 1e6);
  return (int32_t)(x > 2147483647.0 ? 2147483647.0 : (x < -2147483648.0 ? -2147483648.0 : x));
}

void hal_command_frame(int32_t *pos, uint8_t n) {
  for (int j = 0; j < n; j++) pos[j] = urad(q[j] + opt.offset[j]);
}

void hal_read_joints(int32_t *pos, int16_t *vel, int16_t *cur, int8_t *temp, uint8_t *flags, uint8_t n) {
  for (int j = 0; j < n; j++) {
    double p = q[j] + (opt.noise > 0 ? gauss() * opt.noise : 0.0);
    if (opt.resolution > 0) p = round(p / opt.resolution) * opt.resolution;
    pos[j] = urad(opt.sign[j] * p + opt.offset[j]);
    double v = opt.sign[j] * qd[j] * 1e3, c = enabled ? (target_b[j] - opt.offset[j] - q[j]) * 2000.0 : 0.0;
    vel[j] = (int16_t)fmax(-32768, fmin(32767, round(v)));
    cur[j] = (int16_t)fmax(-32768, fmin(32767, round(c)));
    temp[j] = 35;
    flags[j] = 0;
  }
}

void hal_write_joints(const int32_t *target, uint8_t n, uint8_t on) {
  for (int j = 0; j < n; j++) target_b[j] = target[j] * 1e-6;
  enabled = on;
}

static void servo_step(double dt) {
  for (int j = 0; j < opt.n; j++) {
    if (!enabled || dt <= 0) { qd[j] = 0; continue; }
    double alpha = opt.tau > 0 ? fmin(1.0, dt / opt.tau) : 1.0;
    double dq = (target_b[j] - opt.offset[j] - q[j]) * alpha, lim = opt.vmax[j] * dt;
    dq = fmax(-lim, fmin(lim, dq));
    q[j] += dq;
    qd[j] = dq / dt;
  }
}

/* parameter storage: in memory, kept across simulated reboots (as flash keeps it across resets) */
static unsigned char stored[2048];
static size_t stored_len;
int hal_storage_read(void *data, size_t len) {
  if (len != stored_len) return -1;
  memcpy(data, stored, len);
  return 0;
}
int hal_storage_write(const void *data, size_t len) {
  if (len > sizeof stored) return -1;
  memcpy(stored, data, len);
  stored_len = len;
  return 0;
}

static int32_t urad(double v);

/* a power-up: RAM from scratch (the command line's limits), then what PARAM_SAVE wrote */
static void boot(double now) {
  t_boot = now;
  hil_board_init(&board, (uint8_t)opt.kind, (uint8_t)opt.n, 0);
  for (int j = 0; j < opt.n; j++) {
    board.joint[j].pos_min_urad = urad(opt.lower[j]);
    board.joint[j].pos_max_urad = urad(opt.upper[j]);
    board.joint[j].vel_max_mrad_s = (int32_t)llround(opt.vmax[j] * 1e3);
    board.joint[j].max_step_urad = urad(opt.max_step);
  }
  if (opt.watchdog_ms) board.cmd_timeout_ms = (uint32_t)opt.watchdog_ms;
  if (stored_len) hil_board_load_params(&board);
}

void hal_reset(void) { boot(mono()); }
int hal_home(uint32_t joint_mask, uint8_t method) { (void)joint_mask; (void)method; return 0; }

/* ------------------------------------------------------------------ the wire: pacing, latency, faults */
struct pending { double release; size_t len; uint8_t data[HIL_TX_BUF + 64]; };
static struct pending queue[QUEUE];
static int q_head, q_len;
static double last_release, now_s;
/* how late this process woke up (s): the commands that waited in the pty meanwhile reached a real
   board spread over that time, and their STATEs went out on the wire then; they are paced from
   then, not queued up behind one another from now */
static double woke_late;
static unsigned long tx_dropped;

static double rnd(void) { return rand() / ((double)RAND_MAX + 1.0); }

static size_t mangle(uint8_t *d, size_t len) {
  if (opt.corrupt > 0)
    for (size_t i = 0; i < len; i++) if (rnd() < opt.corrupt) d[i] ^= (uint8_t)(1u << (rand() % 8));
  if (opt.drop > 0) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) if (rnd() >= opt.drop) d[o++] = d[i];
    len = o;
  }
  return len;
}

static int is_state(const uint8_t *wire, size_t len) {
  uint8_t body[HIL_MAX_BODY + 1];
  if (len < 4) return 0;
  int n = hil_cobs_decode(wire + 1, len - 2, body, sizeof body);
  return n > 2 && body[1] == 0x30;
}

size_t hal_uart_write(const uint8_t *data, size_t len) {
  double byte_time = opt.baud > 0 ? 10.0 / opt.baud : 0.0;
  if (is_state(data, len) && last_release - now_s > 0.004) { tx_dropped++; return 0; }  /* a full TX queue drops STATE */
  if (q_len == QUEUE) { tx_dropped++; return 0; }
  struct pending *p = &queue[(q_head + q_len++) % QUEUE];
  size_t g = 0;
  if (opt.garbage > 0 && rnd() < opt.garbage) {
    g = 1 + (size_t)(rand() % 64);
    for (size_t i = 0; i < g; i++) p->data[i] = (uint8_t)rand();
  }
  memcpy(p->data + g, data, len);
  p->len = mangle(p->data, len + g);
  double release = fmax(now_s - woke_late, last_release) + (double)p->len * byte_time;
  last_release = release;
  p->release = release + opt.latency + opt.delay;
  return len;
}

static void flush(int fd, double now) {
  while (q_len && queue[q_head].release <= now) {
    struct pending *p = &queue[q_head];
    if (write(fd, p->data, p->len) < 0) tx_dropped++;
    q_head = (q_head + 1) % QUEUE;
    q_len--;
  }
}

static void bad_state(void) {
  /* a STATE that frames and checks but carries one joint more than the board has */
  uint8_t body[HIL_MAX_BODY], wire[HIL_TX_BUF];
  int n = opt.n + 1;
  size_t plen = 18 + 10 * (size_t)n;
  memset(body, 0, sizeof body);
  body[0] = HIL_PROTOCOL_MAJOR << 4;
  body[1] = 0x30;
  body[4 + 11] = (uint8_t)n;
  uint32_t crc = hil_crc32(body, 4 + plen);
  for (int k = 0; k < 4; k++) body[4 + plen + k] = (uint8_t)(crc >> (8 * k));
  wire[0] = 0;
  size_t w = hil_cobs_encode(body, plen + 8, wire + 1);
  wire[w + 1] = 0;
  hal_uart_write(wire, w + 2);
}

/* ------------------------------------------------------------------ serving */
static volatile sig_atomic_t stopping, usr1;
static void on_stop(int s) { stopping = s; }
static void on_usr1(int s) { (void)s; usr1 = 1; }

static int in_window(const struct window *w, int n, double rel) {
  for (int i = 0; i < n; i++) if (w[i].at <= rel && rel < w[i].at + w[i].dur) return 1;
  return 0;
}

static int open_pty(int *slave_fd, char *path, size_t cap) {
  int m = posix_openpt(O_RDWR | O_NOCTTY);
  if (m < 0 || grantpt(m) || unlockpt(m)) return -1;
  const char *name = ptsname(m);
  if (!name) return -1;
  snprintf(path, cap, "%s", name);
  *slave_fd = open(path, O_RDWR | O_NOCTTY);
  if (*slave_fd < 0) return -1;
  struct termios t;
  tcgetattr(*slave_fd, &t);
  cfmakeraw(&t);
  tcsetattr(*slave_fd, TCSANOW, &t);
  fcntl(m, F_SETFL, fcntl(m, F_GETFL) | O_NONBLOCK);
  return m;
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  srand(opt.seed);
  if (opt.parent) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != opt.parent) return 0;
  }
  /* before the path is said: whoever reads it may stop us at once, and the link must still go */
  signal(SIGTERM, on_stop);
  signal(SIGINT, on_stop);
  char path[128];
  int slave, master = open_pty(&slave, path, sizeof path);
  if (master < 0) { perror("emulator: pty"); return 1; }
  if (opt.link) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", opt.link);
    unlink(tmp);
    if (symlink(path, tmp) || rename(tmp, opt.link)) perror("emulator: --link");
  }
  memcpy(q, opt.initial, sizeof q);
  double t0 = mono();
  boot(t0);
  printf("%s\n", path);
  fflush(stdout);
  fprintf(stderr, "board emulator (C firmware, host build): %s (%d joints) on %s, uid ",
          model->name, opt.n, path);
  for (int k = 0; k < 12; k++) fprintf(stderr, "%02X", opt.uid[k]);
  fprintf(stderr, ", boot id %08x, state %u bytes\n", board.boot_id, (unsigned)sizeof board);
  signal(SIGUSR1, on_usr1);
  signal(SIGPIPE, SIG_IGN);
  double next_tick = t0, last = t0, last_wake = t0;
  int reboot_i = 0, bad_i = 0;
  uint8_t buf[4096];
  while (!stopping) {
    double now = mono(), rel = now - t0;
    now_s = now;
    if (opt.duration > 0 && rel >= opt.duration) break;
    if (opt.disconnect_at >= 0 && rel >= opt.disconnect_at) return 3;
    if (reboot_i < opt.n_reboots && rel >= opt.reboots[reboot_i]) { reboot_i++; boot(now); }
    if (usr1) {
      usr1 = 0;
      if (opt.mute_usr1 > 0 && opt.n_mutes < MAX_WINDOWS) opt.mutes[opt.n_mutes++] = (struct window){rel, opt.mute_usr1};
      if (opt.stall_usr1 > 0 && opt.n_stalls < MAX_WINDOWS) opt.stalls[opt.n_stalls++] = (struct window){rel, opt.stall_usr1};
    }
    int stalled = in_window(opt.stalls, opt.n_stalls, rel), muted = in_window(opt.mutes, opt.n_mutes, rel);
    if (bad_i < opt.n_bad && rel >= opt.bad_states[bad_i]) { bad_i++; bad_state(); }
    double wake = next_tick;
    if (q_len && !stalled && queue[q_head].release < wake) wake = queue[q_head].release;
    double timeout = fmax(0.0, wake - now);
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(master, &fds);
    struct timeval tv = {(time_t)timeout, (suseconds_t)((timeout - floor(timeout)) * 1e6)};
    int r = select(master + 1, &fds, NULL, NULL, &tv);
    now = mono();
    now_s = now;
    /* late: the time since the last wake-up beyond the sleep asked for and the 1 ms the work
       between may take */
    woke_late = fmax(0.0, now - last_wake - timeout - 0.001);
    last_wake = now;
    if (r > 0) {
      ssize_t k = read(master, buf, sizeof buf);
      if (k > 0 && !stalled) {
        size_t len = mangle(buf, (size_t)k);
        hil_board_rx(&board, buf, len, hal_micros());
      }
    }
    if (now >= next_tick) {
      if (!stalled) {
        servo_step(now - last);
        hil_board_tick(&board, hal_micros());
      }
      last = now;
      next_tick += 0.001;
      if (next_tick < now - 0.05) next_tick = now + 0.001;
    }
    if (muted) q_len = 0;             /* replies lost on the way: the host hears nothing */
    if (!stalled) flush(master, now);
  }
  close(master);
  close(slave);
  if (opt.link) {               /* a stale by-id name would send the next run to whoever gets the pty */
    char seen[128];
    ssize_t k = readlink(opt.link, seen, sizeof seen - 1);
    if (k > 0) { seen[k] = 0; if (!strcmp(seen, path)) unlink(opt.link); }
  }
  return stopping ? 128 + stopping : 0;
}
