(semicircular arc of radius 80 mm in the XY plane, R form, then back along the diameter)
G21 G90 G17
G0 X80 Y0 Z10
G1 Z0 F300
G3 X-80 Y0 R80 F600   ; half circle, counter-clockwise
G1 X80                ; the diameter
G1 Z10
M2
