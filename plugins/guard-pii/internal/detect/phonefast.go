package detect

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/nyaruka/phonenumbers"
)

// The phone-number library's Parse and IsValidNumber cost 30-70 µs per
// candidate, mostly in regular expressions rebuilt from strings on every
// call (an extension pattern run over the whole input, and per-desc
// patterns concatenated and looked up in a global cache). A CRM export of
// 1 MB holds a thousand phone numbers or more, which would take the whole
// tokenization budget. So the path below re-traces the library's own
// decision for the inputs the scanner produces (ASCII digits and
// separators, "+" or "(" first): same metadata objects, same patterns, the
// same steps as parseHelper, IsValidNumber and the VALID leniency, with the
// patterns compiled once per region. Inputs it does not trace (an
// international dialling prefix such as "011 44 …") go to the library
// itself. TestFastPhoneMatchesLibrary holds the two to the same verdict on
// every region's example numbers in every format, on mutations of them and
// on random digit strings.

// Country-code sources, as in phonenumbers.PhoneNumber_CountryCodeSource.
const (
	srcPlus = iota
	srcWithoutPlus
	srcDefault
)

// Results of testNumberLength that the parse cares about.
const (
	lenPossible = iota
	lenLocalOnly
	lenTooShort
	lenTooLong
	lenInvalid
)

type phoneDesc struct {
	lengths []int32
	re      *regexp.Regexp // ^(?:pattern)$
}

func (d *phoneDesc) matches(nsn string) bool {
	if d == nil {
		return false
	}
	if len(d.lengths) > 0 {
		found := false
		for _, l := range d.lengths {
			if int(l) == len(nsn) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return d.re.MatchString(nsn)
}

type phoneFormat struct {
	leading        *regexp.Regexp // ^(?:last leading digits pattern), or nil
	pattern        *regexp.Regexp // ^(?:pattern)$
	prefixRule     string
	prefixOptional bool
	firstGroupOnly bool
}

// phoneMeta is one region's metadata with its patterns compiled.
type phoneMeta struct {
	countryCode   int
	general       *phoneDesc
	generalRe     *regexp.Regexp
	localLengths  []int32
	kinds         []*phoneDesc // premium rate through voicemail
	fixedLine     *phoneDesc
	mobile        *phoneDesc
	sameFixedMob  bool
	nationalPfx   *regexp.Regexp // ^(?:national prefix for parsing), or nil
	transformRule string
	// idd is the international prefix, unanchored as the library uses it;
	// an empty prefix compiles to a pattern that matches everywhere, which
	// is what the library does with it too.
	idd     *regexp.Regexp
	leading *regexp.Regexp // ^(?:leading digits), or nil
	formats []phoneFormat
}

var (
	phoneMetaMu    sync.Mutex
	phoneMetaCache = map[string]*phoneMeta{}
	phoneMetaByID  = sync.OnceValue(func() map[string]*phonenumbers.PhoneMetadata {
		m := map[string]*phonenumbers.PhoneMetadata{}
		coll, err := phonenumbers.MetadataCollection()
		if err != nil {
			return m
		}
		for _, md := range coll.GetMetadata() {
			if md.GetId() == phonenumbers.REGION_CODE_FOR_NON_GEO_ENTITY {
				m["001/"+strconv.Itoa(int(md.GetCountryCode()))] = md
			} else {
				m[md.GetId()] = md
			}
		}
		return m
	})
)

// metaFor mirrors getMetadataForRegionOrCallingCode: a geographic region by
// code, or a non-geographic entity ("001") by calling code. nil when the
// library has no metadata.
func metaFor(cc int, region string) *phoneMeta {
	key := region
	if region == phonenumbers.REGION_CODE_FOR_NON_GEO_ENTITY {
		key = "001/" + strconv.Itoa(cc)
	} else if !phonenumbers.GetSupportedRegions()[region] {
		return nil
	}
	phoneMetaMu.Lock()
	defer phoneMetaMu.Unlock()
	if pm, ok := phoneMetaCache[key]; ok {
		return pm
	}
	md := phoneMetaByID()[key]
	var pm *phoneMeta
	if md != nil {
		pm = compileMeta(md)
	}
	phoneMetaCache[key] = pm
	return pm
}

func compileDesc(d *phonenumbers.PhoneNumberDesc) *phoneDesc {
	if d == nil {
		return nil
	}
	return &phoneDesc{lengths: d.PossibleLength, re: regexp.MustCompile("^(?:" + d.GetNationalNumberPattern() + ")$")}
}

func compileMeta(md *phonenumbers.PhoneMetadata) *phoneMeta {
	pm := &phoneMeta{
		countryCode:   int(md.GetCountryCode()),
		general:       compileDesc(md.GetGeneralDesc()),
		localLengths:  md.GetGeneralDesc().GetPossibleLengthLocalOnly(),
		fixedLine:     compileDesc(md.GetFixedLine()),
		mobile:        compileDesc(md.GetMobile()),
		sameFixedMob:  md.GetSameMobileAndFixedLinePattern(),
		transformRule: md.GetNationalPrefixTransformRule(),
	}
	pm.generalRe = pm.general.re
	for _, d := range []*phonenumbers.PhoneNumberDesc{md.GetPremiumRate(), md.GetTollFree(), md.GetSharedCost(),
		md.GetVoip(), md.GetPersonalNumber(), md.GetPager(), md.GetUan(), md.GetVoicemail()} {
		pm.kinds = append(pm.kinds, compileDesc(d))
	}
	if p := md.GetNationalPrefixForParsing(); p != "" {
		pm.nationalPfx = regexp.MustCompile("^(?:" + p + ")")
	}
	pm.idd = regexp.MustCompile(md.GetInternationalPrefix())
	if p := md.GetLeadingDigits(); p != "" {
		pm.leading = regexp.MustCompile("^(?:" + p + ")")
	}
	for _, f := range md.GetNumberFormat() {
		pf := phoneFormat{
			pattern:        regexp.MustCompile("^(?:" + f.GetPattern() + ")$"),
			prefixRule:     f.GetNationalPrefixFormattingRule(),
			prefixOptional: f.GetNationalPrefixOptionalWhenFormatting(),
		}
		if ld := f.GetLeadingDigitsPattern(); len(ld) > 0 {
			pf.leading = regexp.MustCompile("^(?:" + ld[len(ld)-1] + ")")
		}
		pf.firstGroupOnly = phonenumbers.FIRST_GROUP_ONLY_PREFIX_PATTERN.MatchString(pf.prefixRule)
		pm.formats = append(pm.formats, pf)
	}
	return pm
}

// stripNationalPrefix traces maybeStripNationalPrefixAndCarrierCode.
func (pm *phoneMeta) stripNationalPrefix(number string) (string, bool) {
	if number == "" || pm.nationalPfx == nil || !pm.nationalPfx.MatchString(number) {
		return number, false
	}
	viable := pm.generalRe.MatchString(number)
	groups := pm.nationalPfx.FindStringSubmatchIndex(number)
	n := len(groups)/2 - 1
	if pm.transformRule == "" || groups[n*2] < 0 {
		if viable && !pm.generalRe.MatchString(number[groups[1]:]) {
			return number, false
		}
		return number[groups[1]:], true
	}
	transformed := pm.nationalPfx.ReplaceAllString(number, pm.transformRule)
	if viable && !pm.generalRe.MatchString(transformed) {
		return number, false
	}
	return transformed, true
}

// testLength traces testNumberLength for the general description. ok is
// false where the library would index an empty length list.
func (pm *phoneMeta) testLength(number string) (result int, ok bool) {
	lengths := pm.general.lengths
	if len(lengths) == 0 {
		return 0, false
	}
	if lengths[0] == -1 {
		return lenInvalid, true
	}
	n := int32(len(number))
	for _, l := range pm.localLengths {
		if l == n {
			return lenLocalOnly, true
		}
	}
	switch {
	case lengths[0] == n:
		return lenPossible, true
	case lengths[0] > n:
		return lenTooShort, true
	case lengths[len(lengths)-1] < n:
		return lenTooLong, true
	}
	for _, l := range lengths[1:] {
		if l == n {
			return lenPossible, true
		}
	}
	return lenInvalid, true
}

// hasType traces getNumberTypeHelper(nsn) != UNKNOWN.
func (pm *phoneMeta) hasType(nsn string) bool {
	if !pm.general.matches(nsn) {
		return false
	}
	// The library tries the rarer types first because it reports which
	// type matched; for validity any match will do, so the common ones go
	// first.
	if pm.fixedLine.matches(nsn) || (!pm.sameFixedMob && pm.mobile.matches(nsn)) {
		return true
	}
	for _, d := range pm.kinds {
		if d.matches(nsn) {
			return true
		}
	}
	return false
}

// fastPhoneValid decides whether cand (ASCII digits and separators, at
// most one "+" right at the start or after an opening parenthesis) is a
// valid number read in region, as phonenumbers.ParseAndKeepRawInput
// followed by phonenumbers.VALID.Verify would. decided is false when the
// input takes a path this function does not trace.
func fastPhoneValid(cand, region string) (valid, decided bool) {
	plus := strings.IndexByte(cand, '+') >= 0
	var buf [24]byte
	digits := buf[:0]
	for i := 0; i < len(cand); i++ {
		if isDigit(cand[i]) {
			digits = append(digits, cand[i])
		}
	}
	all := string(digits)
	def := metaFor(0, region)
	if def == nil {
		return false, false
	}
	var (
		cc       int
		national string
		source   = srcDefault
	)
	if plus {
		source = srcPlus
		if len(all) <= phonenumbers.MIN_LENGTH_FOR_NSN {
			return false, true
		}
		cc, national = extractCountryCode(all)
		if cc == 0 {
			return false, true
		}
	} else {
		if loc := def.idd.FindStringIndex(all); loc != nil && loc[0] == 0 && (loc[1] >= len(all) || all[loc[1]] != '0') {
			return false, false // written with an international dialling prefix
		}
		ccs := strconv.Itoa(def.countryCode)
		if strings.HasPrefix(all, ccs) {
			potential, _ := def.stripNationalPrefix(all[len(ccs):])
			lv, ok := def.testLength(all)
			if !ok {
				return false, false
			}
			if (!def.generalRe.MatchString(all) && def.generalRe.MatchString(potential)) || lv == lenTooLong {
				national, cc, source = potential, def.countryCode, srcWithoutPlus
			}
		}
		if source == srcDefault {
			national, cc = all, def.countryCode
		}
	}
	rm := def
	if source != srcDefault {
		if r := phonenumbers.GetRegionCodeForCountryCode(cc); r != region {
			rm = metaFor(cc, r)
		}
	}
	if rm != nil {
		potential, _ := rm.stripNationalPrefix(national)
		lv, ok := rm.testLength(potential)
		if !ok {
			return false, false
		}
		if lv != lenTooShort && lv != lenLocalOnly && lv != lenInvalid {
			national = potential
		}
	}
	if len(national) < phonenumbers.MIN_LENGTH_FOR_NSN || len(national) > phonenumbers.MAX_LENGTH_FOR_NSN {
		return false, true
	}
	// The national significant number is national itself: the library
	// stores it as an integer plus a count of leading zeros and rebuilds the
	// same string.
	if !validNumber(cc, national) {
		return false, true
	}
	if source != srcDefault {
		return true, true
	}
	return nationalPrefixPresentIfRequired(cc, national, all), true
}

// extractCountryCode traces the library's extractCountryCode: the first one
// to three digits that are a calling code.
func extractCountryCode(full string) (int, string) {
	if full == "" || full[0] == '0' {
		return 0, ""
	}
	for i := 1; i <= phonenumbers.MAX_LENGTH_COUNTRY_CODE && i <= len(full); i++ {
		cc, _ := strconv.Atoi(full[:i])
		if len(phonenumbers.GetRegionCodesForCountryCode(cc)) > 0 {
			return cc, full[i:]
		}
	}
	return 0, ""
}

// validNumber traces IsValidNumber: pick the region among those sharing the
// calling code, then check the number has a type there.
func validNumber(cc int, nsn string) bool {
	regions := phonenumbers.GetRegionCodesForCountryCode(cc)
	region := ""
	switch len(regions) {
	case 0:
	case 1:
		region = regions[0]
	default:
		for _, r := range regions {
			pm := metaFor(cc, r)
			if pm == nil {
				continue
			}
			if pm.leading != nil {
				if pm.leading.MatchString(nsn) {
					region = r
					break
				}
			} else if pm.hasType(nsn) {
				region = r
				break
			}
		}
	}
	pm := metaFor(cc, region)
	if pm == nil || (region != phonenumbers.REGION_CODE_FOR_NON_GEO_ENTITY && cc != pm.countryCode) {
		return false
	}
	return pm.hasType(nsn)
}

// nationalPrefixPresentIfRequired traces IsNationalPrefixPresentIfRequired
// for a number read in national format: where the region's formatting rule
// requires the national prefix ("0" in "020 7946 0958"), the digits as
// written must start with it.
func nationalPrefixPresentIfRequired(cc int, nsn, rawDigits string) bool {
	region := phonenumbers.GetRegionCodeForCountryCode(cc)
	if region == phonenumbers.REGION_CODE_FOR_NON_GEO_ENTITY {
		return true
	}
	pm := metaFor(cc, region)
	if pm == nil {
		return true
	}
	for _, f := range pm.formats {
		if f.leading != nil && !f.leading.MatchString(nsn) {
			continue
		}
		if !f.pattern.MatchString(nsn) {
			continue
		}
		if f.prefixRule == "" || f.prefixOptional || f.firstGroupOnly {
			return true
		}
		_, stripped := pm.stripNationalPrefix(rawDigits)
		return stripped
	}
	return true
}
