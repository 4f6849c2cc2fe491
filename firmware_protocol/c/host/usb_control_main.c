/* Endpoint 0 of the USB CDC port (usb/cdc_acm.c) on the host, for the tests: one request per line
 * on stdin, one answer per line on stdout.
 *   in:  setup <16 hex digits>      out: send <hex> | status | receive <n> | stall  [event <e> <value>]
 *   in:  data <hex>                 out: status | stall   (the OUT data stage of a `receive`)
 *   in:  state                      out: state <configuration> <line coding hex> <control lines>
 * argv[1]: the unique id, 24 hex digits. */
#include <stdio.h>
#include <string.h>

#include "../usb/cdc_acm.h"

static size_t unhex(const char *s, uint8_t *out, size_t max) {
  size_t n = 0;
  unsigned v;
  while (n < max && sscanf(s + 2 * n, "%2x", &v) == 1) out[n++] = (uint8_t)v;
  return n;
}

static void print_hex(const uint8_t *d, size_t n) {
  for (size_t i = 0; i < n; i++) printf("%02x", d[i]);
}

int main(int argc, char **argv) {
  uint8_t uid[12] = {0};
  if (argc > 1) unhex(argv[1], uid, sizeof uid);
  static struct cdc_state s;
  cdc_init(&s, uid);
  char line[512];
  static const char *const actions[] = {"send", "status", "receive", "stall"};
  static const char *const events[] = {"none", "set_address", "configured", "deconfigured"};
  while (fgets(line, sizeof line, stdin)) {
    uint8_t buf[200];
    if (strncmp(line, "setup ", 6) == 0) {
      struct cdc_reply r;
      if (unhex(line + 6, buf, 8) != 8) { puts("error"); fflush(stdout); continue; }
      cdc_control(&s, buf, &r);
      printf("%s", actions[r.action]);
      if (r.action == CDC_SEND) { putchar(' '); print_hex(r.data, r.len); }
      if (r.action == CDC_RECEIVE) printf(" %u", r.len);
      if (r.event != CDC_EV_NONE) printf(" event %s %u", events[r.event], r.value);
      putchar('\n');
    } else if (strncmp(line, "data ", 5) == 0) {
      size_t n = unhex(line + 5, buf, sizeof buf);
      puts(actions[cdc_control_out(&s, buf, n)]);
    } else if (strncmp(line, "state", 5) == 0) {
      printf("state %u ", s.configuration);
      print_hex(s.line_coding, sizeof s.line_coding);
      printf(" %u\n", s.control_lines);
    } else {
      puts("error");
    }
    fflush(stdout);
  }
  return 0;
}
