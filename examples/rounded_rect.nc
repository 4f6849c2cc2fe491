(rounded rectangle 200 x 120 mm, corner radius 20 mm, along the top face edge)
(program frame: workpiece top face, z up; as a CAM package writes it)
N10 G21 G90 G17
N20 G0 X-80 Y-60 Z10
N30 G1 Z0 F300
N40 G1 X80 F600
N50 G3 X100 Y-40 I0 J20
N60 G1 Y40
N70 G3 X80 Y60 I-20 J0
N80 G1 X-80
N90 G3 X-100 Y40 I0 J-20
N100 G1 Y-40
N110 G3 X-80 Y-60 I20 J0
N120 G1 Z10 F300
N130 M30
