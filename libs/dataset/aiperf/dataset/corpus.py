"""Source text for synthetic prompts: original prose written for this project (no licence strings).

Prompts are stitched from word-aligned slices of this text, so its only job is to look like
ordinary English with some numbers, punctuation and line breaks.
"""

CORPUS = """\
The harbour woke before the town did. Long before the bakers lit their ovens, the fishing boats
slid out past the breakwater, their lamps swinging like slow pendulums over the black water. An
old man on the pier counted them as they went, the way he had counted them for forty years, and
when the last one had rounded the lighthouse he folded his hands and waited for the sun.

By seven the market stalls were open. There were crates of lemons from the south, baskets of
mussels still dripping with sea water, bundles of thyme and rosemary tied with red string. A
woman in a green coat argued cheerfully with the cheese seller about the price of a wheel of
hard mountain cheese, and in the end they agreed on a figure that pleased neither of them,
which is how everyone knew it was fair.

Measurement is the quiet foundation of every engineering discipline. Before a bridge is built,
someone must know how much the steel will stretch on a hot afternoon and how much it will
shrink on a winter night. Before a server is put into production, someone must know how many
requests it can answer in a second, how long the slowest of them will wait, and what happens
when the load doubles without warning. A number without a method is only a rumour; a method
without repetition is only an anecdote.

Consider a simple experiment. Send one hundred requests, one after another, and record the
time each one takes. Then send them ten at a time. Then fifty at a time. Plot the median and the
ninety-ninth percentile against the level of concurrency, and the shape of the curve will tell
you more about the system than any architecture diagram. Where the line bends upward, a queue
has formed somewhere: in the network card, in the scheduler, in a lock that nobody remembered
to remove.

In the valley the river ran high after three days of rain. Farmers walked the edges of their
fields in rubber boots, checking the ditches and the stone walls, clearing branches from the
culverts with long wooden poles. The children were delighted, because the school bus could not
cross the ford, and they spent the morning building dams of mud and pebbles in the yard,
arguing about engineering with great seriousness.

A recipe for a plain loaf of bread needs very little: five hundred grams of flour, ten grams of
salt, a small spoon of yeast and about three hundred and fifty millilitres of warm water. Mix
everything until no dry flour remains, cover the bowl, and leave it alone for an hour. Fold the
dough over itself a few times, wait again, then shape it and let it rise once more before baking
it in a very hot oven for forty minutes. Patience does most of the work.

The library on the corner had been a bank once, and it still had the bank's heavy doors and its
marble counter. Where the tellers used to sit there were now shelves of atlases and dictionaries,
and the old vault, its round steel door propped permanently open, held the children's picture
books. On rainy Saturdays it was the busiest room in the building.

Every language model turns text into tokens before it does anything else. A token may be a whole
word, a fragment of a word, a single punctuation mark or a run of spaces. Common words in
English are usually one token each, while rare names, long numbers and words from other languages
are split into several pieces. Because servers bill, schedule and limit work by tokens rather than
by characters, a benchmark has to count tokens the same way the server does, or its throughput
figures will quietly drift away from the truth.

The expedition left the last village on the second of March with twelve mules, four guides and
enough rice for six weeks. For the first days the path followed the river through terraced
fields; then it climbed into forests of oak and rhododendron, where the air grew cold and the
mules slowed to a careful, deliberate walk. At night the guides told stories around the fire,
and the surveyors wrote up their notes by the light of paraffin lamps.

Question: a train leaves the station at nine fifteen and travels at eighty kilometres per hour.
A second train leaves the same station at ten o'clock on a parallel track and travels at one
hundred and twenty kilometres per hour. At what time does the second train draw level with the
first? Answer: the first train has a lead of sixty kilometres, the second closes the gap at forty
kilometres per hour, so they meet an hour and a half later, at half past eleven.

Good software ages like a well kept garden rather than a monument. Paths that nobody walks are
allowed to grow over; beds that flower every year are divided and replanted; and the gardener
keeps a notebook of what was sown where, so that next spring nobody digs up the bulbs by mistake.
Tests are that notebook. They remember what the code promised when its author has long since
moved on to other work.

The storm arrived in the middle of the afternoon. First the light turned yellow and strange,
then the wind picked up the dust from the road and threw it against the windows, and then the
rain came all at once, so heavy that the street disappeared behind a grey curtain. It lasted
twenty minutes. Afterwards the air smelled of wet stone and cut grass, and the gutters ran like
small rivers towards the sea.

In the workshop behind the station, a clockmaker repaired an old regulator from a village
church. The escapement was worn, two teeth of the great wheel were bent, and somebody had once
tried to fix the pendulum with a length of copper wire. He worked slowly, with a loupe in one eye,
polishing each pivot until it shone, and when at last he set the pendulum swinging the clock
ticked with a sound as even and patient as breathing.

Caching changes everything about performance. When a server has already processed the first
thousand tokens of a prompt, it can keep the intermediate state and reuse it for the next
request that begins the same way. A chat application that sends the same system prompt with
every message benefits enormously; a workload of entirely unrelated prompts benefits not at
all. A fair benchmark therefore says exactly how much of its input is shared, and where.

They planted the orchard in the year the old mill closed: apples along the southern wall,
pears in the sheltered corner, and a row of plums by the lane where the soil was deepest. For
six years the trees gave almost nothing. In the seventh year the branches bent so low with fruit
that the whole village came with ladders and baskets, and the cider that autumn was talked about
for a generation.

Dear committee, thank you for the opportunity to present our results. Over the past twelve
months we have reduced the average response time of the service by thirty-one percent while
serving forty percent more traffic. Most of the improvement came from three changes: batching
small requests together, moving the hottest data closer to the processors, and removing a
retry loop that, under load, multiplied every failure by four.

The lighthouse keeper's log for the winter reads mostly like a list of weather. Wind north
east, force six, visibility poor. Wind east, force seven, heavy swell, lamp lit at four. Wind
falling, sea moderate, a seal on the lower rocks all morning. Between these entries, now and
then, a single sentence of something else: the supply boat late again; read the second volume
twice; the first snowdrops by the wall.

Numbers have their own rhythm when read aloud: three point one four one five nine, two point
seven one eight, one point four one four. Engineers recite tolerances the way sailors recite
tides, and a good estimate, made quickly on the back of an envelope, is worth more in a meeting
than a perfect answer delivered a week too late.

At the end of the day the boats came home in the same order they had left, low in the water,
trailed by gulls. The old man on the pier counted them again, nodded to himself, and walked
slowly up the hill to the café, where his coffee was already waiting on the corner table by
the window.
"""
