(rounded rectangle 80 x 48 mm, corner radius 8 mm: seed 001's first contour at 0.4 scale, for the SO-101)
(program frame: workpiece top face, z up; hil path places it 200 mm in front of the SO-101's base)
N10 G21 G90 G17
N20 G0 X-32 Y-24 Z6
N30 G1 Z0 F300
N40 G1 X32 F1200
N50 G3 X40 Y-16 I0 J8
N60 G1 Y16
N70 G3 X32 Y24 I-8 J0
N80 G1 X-32
N90 G3 X-40 Y16 I0 J-8
N100 G1 Y-16
N110 G3 X-32 Y-24 I8 J0
N120 G1 Z6 F300
N130 M30
